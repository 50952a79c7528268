"""The scheduler: many actors on a few worker threads, and handlers that block.

Real processes: the actors live in a host (spawned there by a `Boss`, so they
are that host's own), driven from the test's node.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time

import pytest

import actors.api
from actors import CallCycle, GenServer, Node
from supervision import ChildSpec, SupFlags, start_supervisor, which_children
from tests.kernel.scale_actors import Asker, Boss, Hanger, Idle, Peer, Sleeper, Sleepy, Slow

pytestmark = pytest.mark.timeout(120)


def _all_answer(refs: list, request: float) -> tuple[list, float]:
    async def main() -> list:
        return await asyncio.gather(*(ref.acall(request, timeout=30) for ref in refs))

    started = time.monotonic()
    answers = asyncio.run(main())
    return answers, time.monotonic() - started


@pytest.mark.parametrize(
    ("blocker", "answer"),
    [
        (Sleeper, "slept"),  # asleep outside the kernel: the monitor brings workers in
        (Asker, "late"),  # waiting in a call: each hands its worker's queue on
    ],
)
def test_five_hundred_handlers_blocked_a_second_answer_in_about_a_second(
    node: Node, blocker: type, answer: str
) -> None:
    boss = node.spawn(Boss, host="own")
    args: tuple = ()
    if blocker is Asker:
        boss.call(("spawn", Slow, 1, ()), timeout=30)
        args = (boss.call(("refs", 1))[0],)  # one actor that answers every call a second later
    boss.call(("spawn", blocker, 500, args), timeout=30)
    refs = boss.call(("refs", 500))
    answers, took = _all_answer(refs, 1.0)
    assert answers == [answer] * 500
    # One second each, side by side (one worker at a time would take 500 s).
    assert took < 4.0, took


def test_a_chain_of_two_hundred_synchronous_calls_in_one_host(node: Node) -> None:
    boss = node.spawn(Boss, host="own")
    assert boss.call(("chain", 200), timeout=60) == 200


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("placement", ["one process", "two processes"])
def test_a_cycle_of_calls_fails_at_once_naming_it(node: Node, size: int, placement: str) -> None:
    hosts = [None] * size if placement == "one process" else [None if i % 2 == 0 else "own" for i in range(size)]
    peers = [node.spawn(Peer, name=f"peer{i}", host=host) for i, host in enumerate(hosts)]
    for i, peer in enumerate(peers):
        peer.call(("peer", peers[(i + 1) % size]))
    started = time.monotonic()
    answer = peers[0].call(("go",), timeout=30)
    took = time.monotonic() - started
    # The last of the ring calls the first, which waits on the second: that
    # call fails at once, and the answer unwinds back up the ring.
    inner = answer
    for _ in range(size - 1):
        assert inner[0] == "answer", answer
        inner = inner[1]
    names = tuple(f"peer{i}" for i in range(size)) + ("peer0",)
    assert inner == ("failed", "CallCycle", ("call_cycle", names)), answer
    assert took < 5.0  # not the call's timeout (20 s)


def test_call_cycle_is_an_exit_that_names_the_cycle() -> None:
    exc = CallCycle(("a", "b", "a"))
    assert exc.reason == ("call_cycle", ("a", "b", "a"))
    assert "a -> b -> a" in str(exc)


def test_a_backlog_of_a_million_does_not_delay_another_actor(node: Node) -> None:
    boss = node.spawn(Boss, host="own")
    backlog, handled, pings = boss.call(("backlog", 1_000_000), timeout=110)
    assert backlog >= 999_000 and handled == 1_000_000
    assert len(pings) >= 10
    median = pings[len(pings) // 2]
    # The flooded actor gives up its worker every batch: a ping to another
    # actor of the process waits at most a batch or two, not the backlog.
    assert median < 0.005, pings[:: max(1, len(pings) // 20)]


def test_a_hundred_thousand_actors_in_one_host_get_their_timeouts_in_time(node: Node) -> None:
    boss = node.spawn(Boss, host="own")
    count, _seconds = boss.call(("spawn", Sleepy, 100_000, ()), timeout=100)
    assert count == 100_000
    # Every one of them is alive and answers.
    assert boss.call(("ask_all",), timeout=100) == [99_997, 99_998, 99_999]
    # Each returns Timeout(1.0): one timer structure for the process, no thread each.
    boss.call(("arm", 1.0), timeout=100)
    deadline = time.monotonic() + 60
    fired, longest = boss.call(("fired",))
    while fired < 100_000 and time.monotonic() < deadline:
        fired, longest = boss.call(("fired",), timeout=30)
    assert fired == 100_000
    # Each came within 2 s of the Timeout(1.0) that asked for it.
    assert longest < 2.0, longest


def test_kill_in_the_middle_of_a_callback_on_a_shared_worker(node: Node) -> None:
    gate = threading.Event()
    report: queue.Queue = queue.Queue()
    hanger = node.spawn(Hanger, gate, report)
    watcher = node.spawn(Idle)
    hanger.call(watcher)
    down = node.monitor(hanger)
    hanger.cast("hang")
    assert report.get(timeout=10) == "in callback"
    node.kill(hanger)
    assert down.wait(5) == (hanger, "killed")  # dead at once, its callback still running
    assert watcher.call("still served") == "still served"  # the other actors go on
    gate.set()
    assert report.get(timeout=10) == "callback over"
    assert not hanger.is_alive()


class WhereAmI(GenServer):
    def handle_call(self, request: object, from_: object) -> tuple[int, str]:
        thread = threading.current_thread()
        return thread.ident or 0, thread.name


def test_thread_own_keeps_a_thread_of_its_own(node: Node) -> None:
    own = node.spawn(WhereAmI, thread="own")
    pooled = node.spawn(WhereAmI)
    first, second = own.call("where"), own.call("where")
    assert first == second and "worker" not in first[1]
    assert "worker" in pooled.call("where")[1]
    with pytest.raises(ValueError):
        node.spawn(WhereAmI, thread="mine")


def test_a_child_spec_may_ask_for_a_thread_of_its_own(node: Node) -> None:
    sup = start_supervisor(node, SupFlags("one_for_one"), [ChildSpec("w", (WhereAmI, ()), thread="own")])
    (child,) = which_children(sup)
    assert "worker" not in child.child.call("where")[1]


def test_a_simple_one_for_one_supervisor_of_a_hundred_thousand(node: Node) -> None:
    boss = node.spawn(Boss, host="own")
    assert boss.call(("sup", 100_000), timeout=110) == 100_000
    killed = boss.call(("kill_children", 100), timeout=30)
    assert len(killed) == 1_000
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        counts, counted, listed, still_there, total = boss.call(("sup_view", killed), timeout=60)
        if counts["active"] == 100_000 and not any(still_there):
            break
    # Every killed child was replaced (by a new ref), and nothing else moved.
    assert counts["active"] == counts["workers"] == 100_000, counts
    assert not any(still_there) and total == 100_000
    assert counted < 1.0 and listed < 1.0, (counted, listed)


class Who(GenServer):
    def handle_call(self, request: object, from_: object) -> object:
        return actors.api.self_ref() == self.ref


def test_self_ref_names_the_actor_whose_callback_runs_not_the_thread(node: Node) -> None:
    # Actors share worker threads: the thread does not say whose turn it is.
    refs = [node.spawn(Who) for _ in range(20)]
    assert all(ref.call("me?") for ref in refs)
    assert actors.api.self_ref() is None  # the program's thread runs no actor
