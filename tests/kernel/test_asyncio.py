"""``await ref.acall(...)`` and ``ref.acast(...)`` in a real asyncio program."""

from __future__ import annotations

import asyncio
import threading

import pytest

from actors import CallTimeout, Exit
from tests.kernel.probes import Echo

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("host", [None, "own"])
def test_acall_answers_concurrent_calls_without_a_thread_each(node, host):
    ref = node.spawn(Echo, host=host)

    async def main() -> tuple[list, int, int, list]:
        threads_before = threading.active_count()
        held = [asyncio.ensure_future(ref.acall("hold", timeout=20)) for _ in range(20)]
        # the loop keeps running while the calls are pending
        ticks = 0
        while await ref.acall("held") < 20 and ticks < 10_000:
            ticks += 1
        threads_during = threading.active_count()
        assert await ref.acall("release") == "released"
        answers = await asyncio.gather(*held)
        echoed = await asyncio.gather(*(ref.acall(i) for i in range(50)))
        return answers, threads_before, threads_during, echoed

    answers, before, during, echoed = asyncio.run(main())
    assert answers == ["late"] * 20
    # No thread per pending call: the process's scheduler may start its few
    # workers (one per CPU, plus spares) with the first turns, no more.
    assert during - before < 10
    assert echoed == list(range(50))


def test_acall_timeout_and_failures(node):
    ref = node.spawn(Echo, host="own")

    async def main() -> list:
        outcomes = []
        try:
            await ref.acall("hold", timeout=0.1)
        except CallTimeout:
            outcomes.append("timeout")
        try:
            await ref.acall("crash")
        except Exit as exc:
            outcomes.append(exc.reason.exc_type)
        try:
            await ref.acall("ping")
        except Exit as exc:
            outcomes.append(exc.reason)
        return outcomes

    assert asyncio.run(main()) == ["timeout", "ValueError", "noproc"]


def test_acast_then_acall_in_order(node):
    ref = node.spawn(Echo, host="own")

    async def main() -> list:
        for i in range(10):
            await ref.acast(i)
        return await ref.acall("seen")

    assert asyncio.run(main()) == [("cast", i) for i in range(10)]


def test_cancelled_acall_leaves_nothing_pending(node):
    ref = node.spawn(Echo, host="own")

    async def main() -> str:
        task = asyncio.ensure_future(ref.acall("hold", timeout=20))
        while await ref.acall("held") < 1:
            pass
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await ref.acall("release") == "released"  # its late reply is dropped
        return await ref.acall("ping")

    assert asyncio.run(main()) == "ping"
    assert not node.runtime.pending
