"""`ActorRef.acall` / `acast` from a real asyncio program.

Calls to actors in host processes are awaited without blocking the event loop
and without a thread per pending call; they keep `call`'s semantics (timeout,
dead target, target killed while calls are pending, no late reply answering a
later call) and a cancelled awaiting task withdraws its pending entry.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest

from actors import CallTimeout, Exit
from tests.kernel.probes import Echo

pytestmark = pytest.mark.timeout(60)

IN_FLIGHT = 200


async def _until(predicate: Any, timeout: float = 10.0) -> None:
    """Await (bounded) until ``predicate()`` holds, yielding to the loop."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for _ in range(100_000):
        if predicate() or loop.time() > deadline:
            break
        await asyncio.sleep(0.005)
    assert predicate()


async def _held(ref: Any, n: int) -> None:
    """Await until ``ref`` (an `Echo`) holds ``n`` calls."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10.0
    for _ in range(10_000):
        held = await ref.acall("held")
        if held >= n or loop.time() > deadline:
            break
        await asyncio.sleep(0.005)
    assert held == n


def test_many_concurrent_acalls_hold_no_thread_each_and_leave_the_loop_responsive(node):
    ref = node.spawn(Echo, host="own")
    rt = node._rt

    async def main() -> None:
        assert await ref.acall("warm") == "warm"
        threads_before = threading.active_count()
        calls = [asyncio.ensure_future(ref.acall("hold", timeout=30.0)) for _ in range(IN_FLIGHT)]
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            for _ in range(20):
                await asyncio.sleep(0.01)
                ticks += 1

        await _held(ref, IN_FLIGHT)
        assert threading.active_count() <= threads_before + 2
        await asyncio.wait_for(ticker(), 10.0)  # the loop ticks while 200 calls wait
        assert ticks == 20 and not any(c.done() for c in calls)
        await ref.acast(("cast", 1))
        assert await ref.acall("release") == "released"
        assert await asyncio.gather(*calls) == ["late"] * IN_FLIGHT
        assert threading.active_count() <= threads_before + 2
        assert ("cast", ("cast", 1)) in await ref.acall("seen")

    asyncio.run(main())
    assert not rt.pending


def test_local_target_and_acast(node):
    ref = node.spawn(Echo)  # in this process: the reply comes in place

    async def main() -> None:
        await ref.acast("hello")
        assert await ref.acall(("x", 1)) == ("x", 1)
        assert ("cast", "hello") in await ref.acall("seen")

    asyncio.run(main())


def test_timeout_raises_call_timeout_and_the_late_reply_is_dropped(node):
    ref = node.spawn(Echo, host="own")
    rt = node._rt

    async def main() -> None:
        with pytest.raises(CallTimeout):
            # Bounded here too: were acall's own timeout broken, this fails in
            # 10 s with a TimeoutError of its own instead of hanging the test.
            await asyncio.wait_for(ref.acall("hold", timeout=0.2), 10.0)
        assert not rt.pending
        assert await ref.acall("release") == "released"  # the late "late" goes nowhere
        assert await ref.acall("next") == "next"
        assert await ref.acall("again") == "again"

    asyncio.run(main())


def test_dead_target_fails_with_noproc(node):
    ref = node.spawn(Echo, host="own")
    node.stop(ref)

    async def main() -> None:
        with pytest.raises(Exit) as info:
            await ref.acall("anyone", timeout=10.0)
        assert info.value.reason == "noproc"

    asyncio.run(main())


def _held_acalls_after(node: Any, ref: Any, end: Callable[[], None]) -> list[Any]:
    """What twenty ``"hold"`` acalls to ``ref`` ended with when ``end()`` ran
    while all were held; none may be left pending in the runtime."""
    rt = node._rt

    async def main() -> list[Any]:
        calls = [asyncio.ensure_future(ref.acall("hold", timeout=30.0)) for _ in range(20)]
        await _held(ref, 20)
        end()
        return await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 10.0)

    results = asyncio.run(main())
    assert not rt.pending
    return results


def test_actor_killed_while_calls_pending_fails_them_with_its_reason(node):
    ref = node.spawn(Echo, host="own")
    results = _held_acalls_after(node, ref, lambda: node.kill(ref))
    assert all(isinstance(r, Exit) for r in results), results


def test_host_killed_while_calls_pending_fails_them(node):
    ref = node.spawn(Echo, host="own")
    results = _held_acalls_after(node, ref, lambda: os.kill(ref.os_pid, signal.SIGKILL))
    assert all(isinstance(r, Exit) for r in results), results


def test_cancelling_the_awaiting_task_withdraws_the_call(node):
    ref = node.spawn(Echo, host="own")
    rt = node._rt

    async def main() -> None:
        task = asyncio.ensure_future(ref.acall("hold", timeout=None))
        await _held(ref, 1)
        assert len(rt.pending) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not rt.pending
        assert await ref.acall("release") == "released"
        assert await ref.acall("after") == "after"

    asyncio.run(main())
