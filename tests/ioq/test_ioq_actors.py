"""IOQ with real processes and real files: the server actors, the facade and the tree.

Ports the seed's `ioq_tests` and `ioq_server2` ``many_clients`` /
``instantiate`` cases onto running actors, and checks what only a running
system shows: dedupe of concurrent reads, failing waiters of a dying file,
restarts by ``ioq_sup``, prioritisation under a backlog, live config.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest

import supervision
from actors import ActorRef, GenServer
from actors.ioq import api
from actors.ioq.file_server import IO_MSG, IO_REPLY, FileServer
from actors.ioq.request import IoTargetDown
from actors.ioq.sup import start_ioq
from tests.ioq.seed_requests import IO_CLASSES, SHARDS, priority
from tests.polling import poll_until

pytestmark = pytest.mark.timeout(60)

SHARD = "shards/00000000-1fffffff/foo/bar.1503945430"


class FakeTarget(GenServer):
    """An IO target that logs what it serves, and can hold requests until opened.

    Answers ``("reply", msg)`` like the seed's ``FakeServer``.
    """

    def init(self, gated: bool = False) -> None:
        self.gated = gated
        self.held: list[tuple[Any, Any, Any]] = []
        self.served: list[Any] = []
        self.ios = 0

    def handle_info(self, message: Any) -> None:
        if type(message) is tuple and message[0] == IO_MSG:
            _tag, tag, reply_to, msg = message
            if type(reply_to) is list:
                reply_to = ActorRef.from_wire(reply_to)
            self.ios += 1
            if self.gated:
                self.held.append((tag, reply_to, msg))
                return
            self.served.append(msg)
            reply_to.send((IO_REPLY, tag, ("reply", msg)))

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "open":
            self.gated = False
            for tag, reply_to, msg in self.held:
                self.served.append(msg)
                reply_to.send((IO_REPLY, tag, ("reply", msg)))
            self.held.clear()
            return "ok"
        if request == "stats":
            return {"ios": self.ios, "held": len(self.held), "served": list(self.served)}
        return ("reply", request)


def _wait_for(check, what: str) -> Any:
    return poll_until(check, what)


@contextmanager
def held_backlog(node, *streams: list[tuple[Any, str]], workers: int = 24) -> Iterator[ActorRef]:
    """A held `FakeTarget` with one interactive request in flight and the
    ``(message, io_class)`` requests of ``streams`` (taken in turn, one of
    each at a time) queued behind it at ioq_server_1; the block runs with all
    of them queued, then the target opens and every request must be answered.
    Yields the target (its ``stats`` say the order it served them in)."""
    target = node.spawn(FakeTarget, True)
    with ThreadPoolExecutor(workers) as pool:
        first = pool.submit(api.call, target, ("first",), ("interactive", SHARD))
        _wait_for(lambda: target.call("stats")["held"] == 1, "the first request in flight")
        futures = [
            pool.submit(api.call, target, msg, (io_class, SHARD)) for turn in zip(*streams) for msg, io_class in turn
        ]
        _wait_for(lambda: _queued() == len(futures), f"a backlog of {len(futures)}")
        try:
            yield target
        finally:  # a failed check in the block must not leave the pool waiting on held calls
            target.call("open")
        for fut in [first, *futures]:
            fut.result(timeout=10)


def _queued(name: str = "ioq_server_1") -> int:
    st = api.get_state(name)
    return len(st["queue"])


@pytest.fixture
def ioq2(node, tmp_path):
    node.config.set("ioq2", "enabled", "true")
    node.config.set("ioq2", "servers", "2")
    sup = start_ioq(node)
    f = node.spawn(FileServer, str(tmp_path / "a.couch"), host="files")
    return sup, f


# -- reads and appends -------------------------------------------------------------


def test_read_and_append_through_ioq2(node, ioq2):
    _sup, f = ioq2
    positions = [
        api.call(f, ("append_bin", f"doc{i}".encode() * (i + 1), True), ("db_update", SHARD)) for i in range(20)
    ]
    for i, pos in enumerate(positions):
        assert api.call(f, ("pread_iolist", pos), ("interactive", SHARD)) == f"doc{i}".encode() * (i + 1)
    raw = api.call(f, ("append", b"0123456789"), ("db_update", SHARD))
    assert api.call(f, ("pread", raw + 3, 4), ("view_update", SHARD, "_design/x")) == b"3456"
    stats = node.stats()
    counters = stats.get("counters", stats)
    assert counters["couchdb.io_queue2.reads.count"] >= 21
    assert counters["couchdb.io_queue2.writes.count"] >= 21


def test_read_and_append_through_ioq1(node, ioq2):
    _sup, f = ioq2
    node.config.set("ioq2", "enabled", "false")
    pos = api.call(f, ("append_bin", b"hello ioq1", True), ("db_update", SHARD))
    assert api.call(f, ("pread_iolist", pos), ("interactive", SHARD)) == b"hello ioq1"
    assert api.call(f, ("pread_iolist", pos), ("db_compact", SHARD)) == b"hello ioq1"
    counters = node.stats().get("counters", {})
    assert counters["couchdb.io_queue.interactive"] >= 1
    assert counters["couchdb.io_queue.db_compact"] >= 1


def test_io_errors_reach_the_caller_and_keep_the_file(node, ioq2):
    _sup, f = ioq2
    pos = api.call(f, ("append_bin", b"x"), None)
    with pytest.raises(EOFError):
        api.call(f, ("pread", pos, 1000), ("interactive", SHARD))
    assert api.call(f, ("pread_iolist", pos), ("interactive", SHARD)) == b"x"


def test_bypass_goes_straight_to_the_file(node, ioq2):
    _sup, f = ioq2
    node.config.set("ioq2.bypass", "interactive", "true")
    pos = api.call(f, ("append_bin", b"direct"), ("db_update", SHARD))
    assert api.call(f, ("pread_iolist", pos), ("interactive", SHARD)) == b"direct"
    counters = node.stats().get("counters", {})
    assert counters["couchdb.io_queue2.bypassed_count"] == 1
    assert counters["couchdb.io_queue2.reads.bypassed_count"] == 1


def test_a_class_bypassed_after_its_route_was_cached_is_bypassed(node, ioq2):
    """Callers remember a (file, dimensions) route; a config change drops them all."""
    _sup, f = ioq2
    pos = api.call(f, ("append_bin", b"routed"), ("db_update", SHARD))
    for _ in range(3):  # queued, and the route is remembered
        assert api.call(f, ("pread_iolist", pos), ("interactive", SHARD)) == b"routed"
    before = node.stats()["counters"]  # this process's counters outlive a node: compare
    queued = before["couchdb.io_queue2.queued"]
    node.config.set("ioq2.bypass", "interactive", "true")
    assert api.call(f, ("pread_iolist", pos), ("interactive", SHARD)) == b"routed"
    counters = node.stats()["counters"]
    assert counters["couchdb.io_queue2.bypassed_count"] == before.get("couchdb.io_queue2.bypassed_count", 0) + 1
    assert counters["couchdb.io_queue2.queued"] == queued
    node.config.set("ioq2.bypass", "interactive", "false")
    assert api.call(f, ("pread_iolist", pos), ("interactive", SHARD)) == b"routed"
    assert node.stats()["counters"]["couchdb.io_queue2.queued"] == queued + 1


@pytest.mark.parametrize("strategy", ["server_per_scheduler", "fd_hash", "random", "single_server"])
def test_dispatch_strategies_all_answer(node, ioq2, strategy):
    _sup, f = ioq2
    node.config.set("ioq2", "dispatch_strategy", strategy)
    pos = api.call(f, ("append_bin", strategy.encode()), ("db_update", SHARD))
    for _ in range(10):
        assert api.call(f, ("pread_iolist", pos), ("interactive", SHARD)) == strategy.encode()


# -- the seed's ioq_tests / ioq_server2 many_clients ---------------------------------


@pytest.mark.parametrize("enabled", ["true", "false"])
def test_instantiate(node, ioq2, enabled):
    """``instantiate``: every class and shard answers, then set_disk_concurrency."""
    node.config.set("ioq2", "enabled", enabled)
    target = node.spawn(FakeTarget)
    with ThreadPoolExecutor(8) as pool:
        futures = {
            pool.submit(api.call, target, ("ref", c, s), priority(c, s)): (c, s) for c in IO_CLASSES for s in SHARDS
        }
        for fut, (c, s) in futures.items():
            assert fut.result(timeout=30) == ("reply", ("ref", c, s))
    old = 1 * 2 if enabled == "true" else 20
    assert api.set_disk_concurrency(10) == old
    for bad in (0, -1, "foo"):
        with pytest.raises(ValueError):
            api.set_disk_concurrency(bad)


def test_many_clients(node, ioq2):
    """``many_clients``: 10 clients, every class x shard, against 50 targets."""
    targets = [node.spawn(FakeTarget) for _ in range(50)]

    def client(seed: int) -> bool:
        import random

        rng = random.Random(seed)
        for c in IO_CLASSES:
            for s in SHARDS:
                ref = ("ref", seed, c, s)
                assert api.call(rng.choice(targets), ref, priority(c, s)) == ("reply", ref)
        return True

    with ThreadPoolExecutor(10) as pool:
        assert all(pool.map(client, range(10), timeout=50))


# -- dedupe, failures ----------------------------------------------------------------


def test_concurrent_reads_of_one_block_are_one_io(node, ioq2):
    node.config.set("ioq2", "dispatch_strategy", "single_server")
    blocker = node.spawn(FakeTarget, True)
    target = node.spawn(FakeTarget)
    with ThreadPoolExecutor(12) as pool:
        held = pool.submit(api.call, blocker, ("pread_iolist", 0), ("interactive", SHARD))
        _wait_for(lambda: blocker.call("stats")["held"] == 1, "the blocker to hold the only slot")
        reads = [pool.submit(api.call, target, ("pread_iolist", 4096), ("interactive", SHARD)) for _ in range(10)]
        _wait_for(
            lambda: api.get_state()["waiters"] and sum(len(w) for _k, w in api.get_state()["waiters"]) == 11,
            "10 merged readers",
        )
        assert _queued() == 1
        blocker.call("open")
        assert held.result(timeout=10) == ("reply", ("pread_iolist", 0))
        assert [r.result(timeout=10) for r in reads] == [("reply", ("pread_iolist", 4096))] * 10
    assert target.call("stats")["ios"] == 1
    assert node.stats()["counters"]["couchdb.io_queue2.merged"] == 9


def test_a_dying_file_fails_its_waiters_with_its_exit_reason(node, ioq2):
    node.config.set("ioq2", "dispatch_strategy", "single_server")
    target = node.spawn(FakeTarget, True)
    with ThreadPoolExecutor(4) as pool:
        calls = [
            pool.submit(api.call, target, ("pread_iolist", 0), ("interactive", SHARD)),
            pool.submit(api.call, target, ("pread_iolist", 0), ("interactive", SHARD)),
        ]
        _wait_for(lambda: target.call("stats")["held"] == 1, "the request in flight")
        _wait_for(lambda: sum(len(w) for _k, w in api.get_state()["waiters"]) == 2, "both waiters")
        node.kill(target)
        for fut in calls:
            with pytest.raises(IoTargetDown) as info:
                fut.result(timeout=10)
            assert info.value.reason == "killed"
    assert node.stats()["counters"]["couchdb.io_queue2.io_errors"] == 1


def test_a_file_host_killed_fails_waiters_and_the_queue_goes_on(node, ioq2, tmp_path):
    _sup, f = ioq2
    doomed = node.spawn(FileServer, str(tmp_path / "b.couch"), host="own")
    pos = api.call(doomed, ("append_bin", b"b"), None)
    os.kill(doomed.os_pid, signal.SIGKILL)
    node.monitor(doomed).wait(5)
    with pytest.raises(IoTargetDown) as info:
        api.call(doomed, ("pread_iolist", pos), ("interactive", SHARD))
    assert info.value.reason in ("killed", "noproc")
    pos = api.call(f, ("append_bin", b"still here"), None)
    assert api.call(f, ("pread_iolist", pos), None) == b"still here"


def test_a_killed_server_host_is_restarted_by_ioq_sup(node, ioq2):
    sup, f = ioq2
    node.config.set("ioq2", "dispatch_strategy", "single_server")
    pos = api.call(f, ("append_bin", b"survivor"), None)
    old = node.whereis("ioq_server_1")
    os.kill(old.os_pid, signal.SIGKILL)
    node.monitor(old).wait(5)

    def restarted():
        child = {c.id: c.child for c in supervision.which_children(sup)}["ioq_server_1"]
        return child not in (old, None, "restarting") and node.whereis("ioq_server_1") == child

    _wait_for(restarted, "ioq_server_1 to come back")
    assert api.call(f, ("pread_iolist", pos), None) == b"survivor"
    assert api.get_concurrency() == 2


# -- prioritisation ------------------------------------------------------------------


def test_interactive_is_served_before_compaction_under_backlog(node, ioq2):
    node.config.set("ioq2", "dispatch_strategy", "single_server")
    with held_backlog(
        node, [(("compact", i), "db_compact") for i in range(10)], [(("read", i), "interactive") for i in range(10)]
    ) as target:
        pass
    served = target.call("stats")["served"]
    kinds = [m[0] for m in served[1:]]
    assert kinds == ["read"] * 10 + ["compact"] * 10


def test_raising_compaction_priority_puts_it_first(node, ioq2):
    node.config.set("ioq2", "dispatch_strategy", "single_server")
    node.config.set("ioq2.classes", "db_compact", "10000")
    _wait_for(
        lambda: api.get_state()["class_p"] and dict(api.get_state()["class_p"])["db_compact"] == 10000.0,
        "the class priority to arrive",
    )
    with held_backlog(
        node, [(("read", i), "interactive") for i in range(5)], [(("compact", i), "db_compact") for i in range(5)]
    ) as target:
        pass
    kinds = [m[0] for m in target.call("stats")["served"][1:]]
    assert kinds == ["compact"] * 5 + ["read"] * 5


# -- config and concurrency ----------------------------------------------------------


def test_config_changes_reach_every_server(node, ioq2):
    node.config.set("ioq2", "concurrency", "3")
    node.config.set("ioq2.users", "foo", "0.5")
    for name in ("ioq_server_1", "ioq_server_2"):
        _wait_for(lambda n=name: api.get_state(n)["concurrency"] == 3, f"{name} concurrency")
        _wait_for(lambda n=name: dict(api.get_state(n)["user_p"]).get("foo") == 0.5, f"{name} user priority")
    assert api.get_concurrency() == 6


def test_set_concurrency_returns_the_old_total_and_validates(node, ioq2):
    assert api.get_concurrency() == 2
    assert api.set_concurrency(10) == 2
    assert api.get_concurrency() == 20
    for bad in (0, -1, "foo", 1.5, True, None):
        with pytest.raises(ValueError):
            api.set_concurrency(bad)
    assert api.get_concurrency() == 20
    assert api.get_state("ioq_server_2")["concurrency"] == 10


def test_queue_depths_sum_over_servers(node, ioq2):
    node.config.set("ioq2", "dispatch_strategy", "single_server")
    classes = ["db_compact", "internal_repl", "low", "db_update", "interactive"]
    with held_backlog(node, [((c, i), c) for i, c in enumerate(classes)], workers=8):
        depths = api.get_queue_depths()
        assert depths == {"compaction": 1, "replication": 1, "low": 1, "channels": {"foo": [1, 1, 0]}}
    assert api.get_queue_depths()["compaction"] == 0


def test_without_servers_queries_report_the_magic_number(node):
    node.config.set("ioq2", "servers", "2")
    assert api.get_concurrency() == -12341234
    assert api.get_queue_depths()["compaction"] == -12341234


# -- the os-process queue ------------------------------------------------------------


def test_os_process_requests_take_a_permit_and_give_it_back(node, ioq2):
    target = node.spawn(FakeTarget)
    assert api.call(target, ("prompt", ["reset"]), ("interactive", SHARD)) == ("reply", ("prompt", ["reset"]))
    assert api.call(target, ("data", "x"), None) == ("reply", ("data", "x"))
    assert api.get_osproc_requests() == []
    assert node.stats()["counters"]["couchdb.io_queue.osproc"] == 2
