"""The co-located fast path: a read whose file actor lives in the IOQ server's
own OS process is done on the server's thread (`FileServer.try_read`).

It must change nothing a caller can observe but the speed: requests are still
chosen by priority, never beyond the concurrency limit, and a file that
crashes on the read still fails its waiters with its exit reason.  The unit
tests of `try_read` run without processes; the rest run the real IOQ2
server with the files spawned in its host (``ioq1``).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from actors import Crash, GenServer
from actors.ioq import api
from actors.ioq.file_server import BUSY, FileServer, IoFailure
from actors.ioq.request import IoTargetDown
from actors.ioq.server2 import request_payload
from actors.ioq.sup import start_ioq
from tests.polling import poll_until

pytestmark = pytest.mark.timeout(60)

SHARD = "shards/00000000-1fffffff/foo/bar.1503945430"
#: The position whose read makes a `GatedFile` raise something other than an IO error.
BOOM = 999_999_999

# Per host process: a `GatedFile`'s own thread waits on _GATE while serving ("hold",).
_GATE = threading.Event()
_HOLDING = threading.Event()


class GatedFile(FileServer):
    """A `FileServer` that logs each IO with whether it ran inline (in the
    server's turn, not in one of the file's own callbacks), can be held busy
    (``("hold",)``), and crashes on a read of `BOOM`."""

    def init(self, path: str) -> None:
        super().init(path)
        # Set on the thread running one of this file's own callbacks: actors
        # share worker threads, so the thread alone does not say whose turn it is.
        self.own_turn = threading.local()
        self.log: list[tuple[Any, bool]] = []
        inner = self._handle

        def handle(msg: Any) -> Any:
            if msg[0] == "hold":
                _HOLDING.set()
                _GATE.wait(30)
                return "held"
            if msg[0] == "pread_iolist" and msg[1] == BOOM:
                raise RuntimeError("boom")
            self.log.append((msg, not getattr(self.own_turn, "active", False)))  # as it arrived
            return inner(msg)

        self._handle = handle

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "log":
            return list(self.log)
        self.own_turn.active = True
        try:
            return super().handle_call(request, from_)
        finally:
            self.own_turn.active = False

    def handle_cast(self, request: Any) -> Any:
        self.own_turn.active = True
        try:
            return super().handle_cast(request)
        finally:
            self.own_turn.active = False

    def handle_info(self, message: Any) -> Any:
        self.own_turn.active = True
        try:
            return super().handle_info(message)
        finally:
            self.own_turn.active = False


class Gate(GenServer):
    """Opens the gate of the `GatedFile`s living in its host process."""

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "holding":
            return _HOLDING.is_set()
        if request == "open":
            _GATE.set()
            return "ok"
        raise ValueError(request)


def _wait_for(check, what: str) -> Any:
    return poll_until(check, what)


@pytest.fixture
def one_server(node):
    node.config.set("ioq2", "enabled", "true")
    node.config.set("ioq2", "servers", "1")
    node.config.set("ioq2", "concurrency", "1")
    start_ioq(node)
    _wait_for(lambda: api.get_concurrency() == 1, "concurrency 1")
    return node


# -- try_read, without processes ------------------------------------------------------


def _bare_file(path: str) -> FileServer:
    fs = FileServer.__new__(FileServer)
    fs.init(path)
    return fs


def test_try_read_reads_only_when_idle_and_open(tmp_path):
    fs = _bare_file(str(tmp_path / "a.couch"))
    pos = fs._do(("append_bin", b"block"))
    assert fs.try_read(("pread_iolist", pos)) == b"block"
    assert fs.try_read(["pread_iolist", pos]) == b"block"  # as decoded from the wire
    assert fs.try_read(("append_bin", b"no")) is BUSY  # writes stay on the file's thread
    assert fs.try_read(("sync",)) is BUSY
    failure = fs.try_read(("pread", pos, 10_000))
    assert type(failure) is IoFailure and isinstance(failure.exception(), EOFError)
    with fs._io_lock:  # the file's own thread is doing IO
        assert fs.try_read(("pread_iolist", pos)) is BUSY
    fs.terminate("normal")
    assert fs.try_read(("pread_iolist", pos)) is BUSY


# -- the fast path in a running IOQ2 server ----------------------------------------------


def test_colocated_reads_run_on_the_server_thread(one_server, tmp_path):
    f = one_server.spawn(GatedFile, str(tmp_path / "a.couch"), host="ioq1")
    positions = [f.call(("append_bin", f"doc{i}".encode())) for i in range(5)]
    for i, pos in enumerate(positions):
        assert api.call(f, ("pread_iolist", pos), ("interactive", SHARD)) == f"doc{i}".encode()
    reads = [entry for entry in f.call("log") if entry[0][0] == "pread_iolist"]
    assert len(reads) == 5 and all(inline for _msg, inline in reads)
    appends = [entry for entry in f.call("log") if entry[0][0] == "append_bin"]
    pos = api.call(f, ("append_bin", b"via ioq"), ("db_update", SHARD))
    assert api.call(f, ("pread_iolist", pos), None) == b"via ioq"
    appends = [entry for entry in f.call("log") if entry[0][0] == "append_bin"]
    assert not any(inline for _msg, inline in appends)  # writes run on the file's own thread


def test_colocated_reads_keep_the_concurrency_limit_and_priority_order(one_server, tmp_path):
    node = one_server
    busy = node.spawn(GatedFile, str(tmp_path / "busy.couch"), host="ioq1")
    idle = node.spawn(GatedFile, str(tmp_path / "idle.couch"), host="ioq1")
    gate = node.spawn(Gate, host="ioq1")
    positions = [idle.call(("append_bin", f"b{i}".encode())) for i in range(20)]
    with ThreadPoolExecutor(24) as pool:
        held = pool.submit(api.call, busy, ("hold",), ("interactive", SHARD))
        _wait_for(lambda: gate.call("holding"), "the only slot held by the busy file")
        futures = []
        for i in range(10):
            futures.append(
                (f"b{i + 10}", pool.submit(api.call, idle, ("pread_iolist", positions[i + 10]), ("db_compact", SHARD)))
            )
            futures.append(
                (f"b{i}", pool.submit(api.call, idle, ("pread_iolist", positions[i]), ("interactive", SHARD)))
            )
        # the idle file could serve them all inline at once; the limit keeps them queued
        _wait_for(lambda: len(api.get_state()["queue"]) == 20, "a backlog of 20")
        assert [entry for entry in idle.call("log") if entry[0][0] == "pread_iolist"] == []
        gate.call("open")
        assert held.result(timeout=10) == "held"
        for expected, fut in futures:
            assert fut.result(timeout=10) == expected.encode()
    reads = [entry for entry in idle.call("log") if entry[0][0] == "pread_iolist"]
    assert all(inline for _msg, inline in reads)
    served = [msg[1] for msg, _inline in reads]
    # every interactive read before any compaction read
    assert sorted(served[:10]) == sorted(positions[:10])
    assert sorted(served[10:]) == sorted(positions[10:])


def test_a_file_crashing_on_an_inline_read_fails_the_caller_with_its_exit_reason(one_server, tmp_path):
    node = one_server
    doomed = node.spawn(GatedFile, str(tmp_path / "doomed.couch"), host="ioq1")
    other = node.spawn(GatedFile, str(tmp_path / "other.couch"), host="ioq1")
    pos = api.call(other, ("append_bin", b"still here"), None)
    assert api.call(doomed, ("pread_iolist", api.call(doomed, ("append_bin", b"x"), None)), None) == b"x"
    assert all(inline for msg, inline in doomed.call("log") if msg[0] == "pread_iolist")
    mon = node.monitor(doomed)
    with pytest.raises(IoTargetDown) as info:
        api.call(doomed, ("pread_iolist", BOOM), ("interactive", SHARD))
    assert info.value.reason == Crash("RuntimeError", "boom", "")
    assert mon.wait(5)[1] == Crash("RuntimeError", "boom", "")  # the file died of it, as if it had read
    with pytest.raises(IoTargetDown):
        api.call(doomed, ("pread_iolist", 0), ("interactive", SHARD))
    # the server lives on and keeps serving the other file inline
    assert api.call(other, ("pread_iolist", pos), ("interactive", SHARD)) == b"still here"
    assert api.get_concurrency() == 1


def test_colocated_identical_reads_merge_and_are_counted_before_the_answers(one_server, tmp_path):
    """Dedupe holds on the inline path: identical reads queued behind a held
    slot become one read whose bytes every caller gets, and the stats the
    server buffers are in `node.stats()` by the time the answers arrive."""
    node = one_server
    busy = node.spawn(GatedFile, str(tmp_path / "busy.couch"), host="ioq1")
    idle = node.spawn(GatedFile, str(tmp_path / "idle.couch"), host="ioq1")
    gate = node.spawn(Gate, host="ioq1")
    same, other1, other2 = (idle.call(("append_bin", f"doc{i}".encode())) for i in range(3))
    with ThreadPoolExecutor(12) as pool:
        held = pool.submit(api.call, busy, ("hold",), ("interactive", SHARD))
        _wait_for(lambda: gate.call("holding"), "the only slot held by the busy file")
        merged = [pool.submit(api.call, idle, ("pread_iolist", same), ("interactive", SHARD)) for _ in range(8)]
        others = [
            pool.submit(api.call, idle, ("pread_iolist", pos), ("interactive", SHARD)) for pos in (other1, other2)
        ]

        def backlog() -> bool:
            state = api.get_state()
            return len(state["queue"]) == 3 and max(len(w) for _k, w in state["waiters"]) == 8

        _wait_for(backlog, "8 identical reads merged into one queued read, and 2 others")
        gate.call("open")
        assert held.result(timeout=10) == "held"
        assert [f.result(timeout=10) for f in merged] == [b"doc0"] * 8
        assert [f.result(timeout=10) for f in others] == [b"doc1", b"doc2"]
    counters = node.stats()["counters"]
    assert counters["couchdb.io_queue2.merged"] == 7
    assert counters["couchdb.io_queue2.queued"] == 11  # every request, merged or not
    assert counters["couchdb.io_queue2.interactive.count"] == 4  # submitted: the hold and 3 reads
    reads = [(msg[1], inline) for msg, inline in idle.call("log") if msg[0] == "pread_iolist"]
    assert sorted(reads) == sorted([(same, True), (other1, True), (other2, True)])


def test_a_request_with_bad_dimensions_is_refused_and_the_server_lives_on(one_server, tmp_path):
    f = one_server.spawn(GatedFile, str(tmp_path / "a.couch"), host="ioq1")
    pos = api.call(f, ("append_bin", b"ok"), None)
    server = one_server.whereis("ioq_server_1")
    reply = server.call(request_payload(f, ("pread_iolist", pos), ("interactive",), None))
    assert type(reply) is IoFailure and isinstance(reply.exception(), ValueError)
    assert server.call(request_payload(f, ("pread_iolist", pos), ("interactive", SHARD), None)) == b"ok"
    assert one_server.whereis("ioq_server_1") == server
