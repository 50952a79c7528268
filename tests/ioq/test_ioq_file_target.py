"""FileTarget: real reads and appends on real files."""

import os
import threading

import pytest

from actors.ioq.file_target import FileTarget, FileTargetError

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def target(tmp_path):
    with FileTarget(tmp_path / "data.bin") as t:
        yield t


def test_append_returns_positions_and_pread_reads_them(target):
    assert target.append(b"hello") == 0
    assert target.append(b"world", fsync=True) == 5
    assert target.size() == 10
    assert target.pread(0, 5) == b"hello"
    assert target.pread(5, 5) == b"world"
    assert target.pread(3, 0) == b""
    with open(target.path, "rb") as fh:
        assert fh.read() == b"helloworld"


def test_framed_blocks(target):
    a = target.append_bin(b"first block")
    b = target.append_bin(b"", fsync=True)
    c = target.append_bin(os.urandom(65536))
    assert (a, b) == (0, 15)
    assert target.pread_iolist(a) == b"first block"
    assert target.pread_iolist(b) == b""
    assert len(target.pread_iolist(c)) == 65536


def test_reads_past_the_end_raise_eof(target):
    target.append(b"abc")
    with pytest.raises(EOFError, match="wanted 10 bytes at 1"):
        target.pread(1, 10)


@pytest.mark.parametrize("pos, length", [(-1, 1), (0, -1), ("0", 1), (0, 1.5), (True, 1)])
def test_bad_offsets_are_rejected(target, pos, length):
    with pytest.raises(FileTargetError):
        target.pread(pos, length)


def test_handle_executes_io_messages(target):
    pos = target.handle(("append_bin", b"block", True))
    raw = target.handle(["append", b"raw"])
    assert target.handle(("pread_iolist", pos)) == b"block"
    assert target.handle(("pread", raw, 3)) == b"raw"
    assert target.handle(("size",)) == target.size()
    assert target.handle(("sync",)) is None
    for bad in [("unknown",), (), "pread", ("pread", 0)]:
        with pytest.raises(FileTargetError, match="IO message"):
            target.handle(bad)
    with pytest.raises(FileTargetError, match="bytes"):
        target.append("text")


def test_reopen_appends_at_the_end(tmp_path):
    path = tmp_path / "f"
    with FileTarget(path) as t:
        t.append(b"12345")
    with FileTarget(path, create=False) as t:
        assert t.append(b"6") == 5
        assert t.pread(0, 6) == b"123456"


def test_missing_file_without_create(tmp_path):
    with pytest.raises(FileNotFoundError):
        FileTarget(tmp_path / "absent", create=False)


def test_close_is_idempotent(tmp_path):
    t = FileTarget(tmp_path / "f")
    t.close()
    t.close()
    assert t.closed


def test_a_target_dropped_without_close_closes_its_file(tmp_path):
    """An actor killed with its target open runs no terminate: the fd goes with the object."""
    t = FileTarget(tmp_path / "f")
    fd = t._fd
    os.fstat(fd)
    del t
    with pytest.raises(OSError):
        os.fstat(fd)


def test_close_then_drop_closes_once(tmp_path):
    t = FileTarget(tmp_path / "f")
    t.close()
    other = os.open(tmp_path / "f", os.O_RDONLY)  # may reuse the closed number
    try:
        del t
        os.fstat(other)  # still open: the finalizer did not close it a second time
    finally:
        os.close(other)


def test_concurrent_appends_and_reads_are_consistent(target):
    per_thread, threads = 200, 8
    positions = {}
    errors = []

    def writer(n):
        try:
            for i in range(per_thread):
                payload = f"{n}:{i}".encode() * 7
                positions[(n, i)] = (target.append_bin(payload), payload)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=20)
    assert not errors and not any(w.is_alive() for w in workers)
    assert len({pos for pos, _ in positions.values()}) == per_thread * threads

    def reader(items):
        for pos, payload in items:
            if target.pread_iolist(pos) != payload:
                errors.append(pos)

    items = list(positions.values())
    readers = [threading.Thread(target=reader, args=(items[i::4],)) for i in range(4)]
    for r in readers:
        r.start()
    for r in readers:
        r.join(timeout=20)
    assert not errors
