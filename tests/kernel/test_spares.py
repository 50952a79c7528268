"""Warm spare hosts: the first actor placed on one runs on the thread the
spare started at boot, with the placement's CPUs, and a spare that dies
before or while it is used fails the spawn cleanly or is not used at all."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import pytest

from actors import GenServer, Node, SpawnError

pytestmark = pytest.mark.timeout(60)


class Where(GenServer):
    """Says which thread runs it and where that thread may run."""

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "thread":
            return threading.current_thread().name
        if request == "cpus":
            return sorted(os.sched_getaffinity(0))
        if request == "all_cpus":  # every thread of the host process
            tasks = os.listdir("/proc/self/task")
            return {tid: sorted(os.sched_getaffinity(int(tid))) for tid in tasks}
        if request == "priority":  # (policy, nice) of every thread of the host process
            return {
                (os.sched_getscheduler(int(tid)), os.getpriority(os.PRIO_PROCESS, int(tid)))
                for tid in os.listdir("/proc/self/task")
            }
        return os.getpid()


def _priorities(pid: int) -> set[tuple[int, int]]:
    """(policy, nice) of every thread of process ``pid``, read from outside."""
    return {
        (os.sched_getscheduler(int(tid)), os.getpriority(os.PRIO_PROCESS, int(tid)))
        for tid in os.listdir(f"/proc/{pid}/task")
    }


def _normal() -> set[tuple[int, int]]:
    return {(os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0))}


def _spare_up(node: Node, timeout: float = 45.0) -> Any:
    """The first spare that is up, once the node has one.  Spares boot at
    SCHED_IDLE: on a machine kept busy by other work they may wait long for
    the CPU, hence the long bound (the test's own timeout is 60 s)."""
    with node._pool.changed:
        assert node._pool.changed.wait_for(lambda: any(h.state == "up" for h in node._pool.spares), timeout=timeout), (
            "no spare came up"
        )
        return next(h for h in node._pool.spares if h.state == "up")


def _taken(node: Node, proc: str, timeout: float = 20.0) -> None:
    """Until ``proc`` is no longer a spare but a placed host."""
    with node._pool.changed:
        assert node._pool.changed.wait_for(lambda: any(h["proc"] == proc for h in node.hosts()), timeout=timeout), (
            f"{proc} never placed"
        )


def test_first_actor_on_a_spare_runs_on_its_warm_thread_with_the_placement_cpus(node):
    first = node.spawn(Where, host="own")  # a fresh fork: no spare yet
    assert first.call("cpus") == sorted(os.sched_getaffinity(0))
    spare = _spare_up(node)
    assert spare.proc not in {h["proc"] for h in node.hosts()}, "a spare is not listed as a host"
    pinned = node.spawn(Where, host="own", cpus={0})
    assert pinned.os_pid == spare.pid, "the placement did not use the warm spare"
    assert pinned.call("thread") == f"actors-warm-{spare.proc}"
    assert pinned.call("cpus") == [0]
    assert set(map(tuple, pinned.call("all_cpus").values())) == {(0,)}
    host = next(h for h in node.hosts() if h["proc"] == spare.proc)
    assert host["own"] and host["cpus"] == [0] and host["label"] is None


def test_a_shared_host_made_from_a_spare_starts_later_actors_on_new_threads(node):
    node.spawn(Where, host="own")
    spare = _spare_up(node)
    a = node.spawn(Where, host="pool")
    b = node.spawn(Where, host="pool")
    assert a.os_pid == b.os_pid == spare.pid
    assert a.call("thread") == f"actors-warm-{spare.proc}"
    assert b.call("thread") != a.call("thread")
    assert [h["label"] for h in node.hosts() if h["proc"] == spare.proc] == ["pool"]
    node.stop(a)  # a shared host does not exit when empty: b still answers
    assert b.call("pid") == spare.pid


def test_a_spare_killed_while_up_is_not_used(node):
    node.spawn(Where, host="own")
    spare = _spare_up(node)
    os.kill(spare.pid, signal.SIGKILL)
    with node._pool.changed:
        assert node._pool.changed.wait_for(lambda: spare.state == "dead", timeout=20.0)
    assert all(h is not spare for h in node._pool.spares)
    ref = node.spawn(Where, host="own")
    assert ref.call("pid") == ref.os_pid != spare.pid


def test_a_spare_that_dies_while_a_spawn_is_forwarded_to_it_fails_that_spawn_cleanly(node):
    node.spawn(Where, host="own")
    spare = _spare_up(node)
    os.kill(spare.pid, signal.SIGSTOP)  # it takes the spawn but cannot start the actor
    outcome: list[Any] = []
    done = threading.Event()

    def spawn() -> None:
        try:
            outcome.append(node.spawn(Where, host="own"))
        except SpawnError as exc:
            outcome.append(exc)
        done.set()

    spawner = threading.Thread(target=spawn)
    spawner.start()
    try:
        _taken(node, spare.proc)
        os.kill(spare.pid, signal.SIGKILL)
        assert done.wait(20.0), "the spawn never returned"
    finally:
        spawner.join(20.0)
    assert isinstance(outcome[0], SpawnError) and outcome[0].reason == "killed", outcome
    again = node.spawn(Where, host="own")  # the node goes on placing actors
    assert again.call("pid") == again.os_pid


def test_placements_faster_than_a_spare_boots_make_the_node_keep_two(node):
    node.spawn(Where, host="own")
    assert node._pool.spare_target == 1, "the first placement of all finds no spare: no reason for two"
    first = _spare_up(node)
    os.kill(node._pool.zygote.pid, signal.SIGSTOP)  # no spare can be forked until it goes on
    try:
        b = node.spawn(Where, host="own")
        assert b.os_pid == first.pid and node._pool.spare_target == 1
        outcome: list[Any] = []
        spawner = threading.Thread(target=lambda: outcome.append(node.spawn(Where, host="own")))
        spawner.start()
        with node._pool.changed:
            assert node._pool.changed.wait_for(lambda: node._pool.spare_target == 2, timeout=20.0)
    finally:
        os.kill(node._pool.zygote.pid, signal.SIGCONT)
    spawner.join(20.0)
    assert outcome and outcome[0].call("pid") == outcome[0].os_pid
    with node._pool.changed:
        assert node._pool.changed.wait_for(
            lambda: sum(h.state == "up" for h in node._pool.spares) == 2, timeout=20.0
        ), "the pool never held two"


def test_a_spare_boots_at_idle_priority_and_its_placed_actor_runs_at_the_normal_one(node):
    node.spawn(Where, host="own")
    spare = _spare_up(node)
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    # Where going back from SCHED_IDLE is not allowed (no CAP_SYS_NICE, RLIMIT_NICE 0),
    # spares boot at the normal priority instead.
    idle = {(os.SCHED_IDLE, nice)} if node._pool.idle_spares else _normal()
    assert _priorities(spare.pid) == idle, "every thread of a spare waits for an idle CPU"
    assert len(os.listdir(f"/proc/{spare.pid}/task")) > 1
    placed = node.spawn(Where, host="pool")
    assert placed.os_pid == spare.pid
    assert placed.call("priority") == _normal(), "a placed spare's threads are back at the normal priority"
    later = node.spawn(Where, host="pool")  # on a thread started after the placement: normal too
    assert later.os_pid == spare.pid and later.call("thread") != placed.call("thread")
    assert later.call("priority") == _normal()


def test_a_spare_taken_while_it_boots_gets_the_normal_priority_once_up(node):
    node.spawn(Where, host="own")
    first = _spare_up(node)
    os.kill(node._pool.zygote.pid, signal.SIGSTOP)  # the next spare is asked for but cannot boot yet
    try:
        assert node.spawn(Where, host="own").os_pid == first.pid
        with node._pool.changed:
            assert node._pool.changed.wait_for(
                lambda: any(h.state == "starting" for h in node._pool.spares), timeout=20.0
            ), "no spare asked for"
            booting = next(h for h in node._pool.spares if h.state == "starting")
        outcome: list[Any] = []
        spawner = threading.Thread(target=lambda: outcome.append(node.spawn(Where, host="own")))
        spawner.start()
        _taken(node, booting.proc)
    finally:
        os.kill(node._pool.zygote.pid, signal.SIGCONT)
    spawner.join(20.0)
    assert outcome and outcome[0].os_pid == booting.pid, "the placement did not wait for the booting spare"
    assert outcome[0].call("priority") == _normal()
