"""Logging: host records reach the embedding program's loggers; no handler is configured for it."""

from __future__ import annotations

import ast
import logging
import os
import queue
import socket
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import supervision as sv
from actors import GenServer
from actors._core.host.logs import HostLogForwarder, LogListener, decode_record, encode_record
from supervision import ChildSpec, SupFlags

pytestmark = pytest.mark.timeout(40)

LOGGER = "actors.test.hostlog"


class Catch(logging.Handler):
    """A handler that hands records to the test through a queue."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: queue.Queue[logging.LogRecord] = queue.Queue()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.put(record)

    def next(self, name: str, timeout: float = 10.0) -> logging.LogRecord:
        """The next record of logger ``name`` (others are skipped); bounded."""
        for _ in range(1000):
            record = self.records.get(timeout=timeout)
            if record.name == name:
                return record
        raise AssertionError(f"no record from {name}")


@pytest.fixture
def catch():
    handler = Catch()
    for name in (LOGGER, "supervision"):
        logging.getLogger(name).addHandler(handler)
    try:
        yield handler
    finally:
        for name in (LOGGER, "supervision"):
            logging.getLogger(name).removeHandler(handler)


class Logs(GenServer):
    """Logs what it is asked to, in whatever process it lives."""

    def handle_call(self, request: Any, from_: Any) -> Any:
        log = logging.getLogger(LOGGER)
        if request == "warn":
            log.warning("warned from %s in %d", "a host", os.getpid(), extra={"detail": {"k": [1, 2]}})
        elif request == "raise":
            try:
                raise KeyError("lost")
            except KeyError:
                log.exception("failed with %r", object())
        elif request == "debug":
            log.debug("quiet")
        elif request == "crash":
            raise RuntimeError("child crashed on purpose")
        return os.getpid()


def test_host_record_reaches_the_embedding_programs_logger(node, catch):
    ref = node.spawn(Logs, host="own")
    pid = ref.call("warn")
    assert pid != os.getpid()
    record = catch.next(LOGGER)
    assert record.getMessage() == f"warned from a host in {pid}"
    assert record.levelno == logging.WARNING and record.levelname == "WARNING"
    assert record.process == pid  # the host's pid, not ours
    assert record.host.startswith("h")
    assert record.detail == {"k": [1, 2]}
    assert record.funcName == "handle_call" and record.pathname == __file__


def test_host_exception_text_and_unpicklable_args_travel(node, catch):
    ref = node.spawn(Logs, host="own")
    ref.call("raise")
    record = catch.next(LOGGER)
    assert record.levelno == logging.ERROR
    assert record.getMessage().startswith("failed with <object object at")
    assert "KeyError: 'lost'" in record.exc_text
    assert "Traceback" in logging.Formatter().format(record)


def test_levels_of_the_embedding_program_apply(node, catch):
    logging.getLogger(LOGGER).setLevel(logging.ERROR)
    try:
        ref = node.spawn(Logs, host="own")
        ref.call("warn")  # below ERROR here: not re-emitted
        ref.call("raise")
        assert catch.next(LOGGER).levelno == logging.ERROR
    finally:
        logging.getLogger(LOGGER).setLevel(logging.NOTSET)


def test_supervisor_report_in_a_host_reaches_supervision_logger(node, catch):
    sup = sv.start_supervisor(
        node, SupFlags(intensity=5), [ChildSpec("w", (Logs, ()))], name="hosted_sup", host="logs_host"
    )
    child = sv.which_children(sup)[0].child
    with pytest.raises(Exception):
        child.call("crash")
    record = catch.next("supervision")
    assert record.levelno == logging.ERROR
    assert record.supervisor == "hosted_sup" and record.child_id == "w" and record.report == "child_terminated"
    assert record.process != os.getpid()


def test_records_sent_just_before_close_are_not_lost(tmp_path):
    """The listener re-emits what arrived before close, then stops and removes its socket."""
    handler = Catch()
    logging.getLogger(LOGGER).addHandler(handler)
    listener = LogListener(str(tmp_path))
    try:
        forwarder = HostLogForwarder(listener.path, host="hx")
        for i in range(50):
            forwarder.handle(logging.LogRecord(LOGGER, logging.WARNING, __file__, 1, "n=%d", (i,), None))
        forwarder.close()
        listener.close()
        assert [handler.next(LOGGER, timeout=0.1).getMessage() for _ in range(50)] == [f"n={i}" for i in range(50)]
        assert not os.path.exists(listener.path)
    finally:
        logging.getLogger(LOGGER).removeHandler(handler)


def test_garbage_frames_are_dropped_and_counted(tmp_path):
    handler = Catch()
    logging.getLogger(LOGGER).addHandler(handler)
    listener = LogListener(str(tmp_path))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(listener.path)
            sock.sendall(struct.pack("!I", 5) + b"nope!")
            sock.sendall(struct.pack("!I", 2) + b"[]")
            good = logging.LogRecord(LOGGER, logging.WARNING, __file__, 1, "after garbage", None, None)
            sock.sendall(encode_record(good))
            assert handler.next(LOGGER).getMessage() == "after garbage"
        assert listener.dropped == 2
    finally:
        listener.close()
        logging.getLogger(LOGGER).removeHandler(handler)


def test_record_codec_round_trip():
    record = logging.LogRecord(LOGGER, logging.INFO, "/x.py", 7, "%s and %d", ("a", 2), None, func="f")
    record.reason = ("shutdown", object())
    frame = encode_record(record, host="h9")
    back = decode_record(frame[4:])
    assert (back.name, back.levelno, back.getMessage(), back.lineno, back.funcName, back.host) == (
        LOGGER,
        logging.INFO,
        "a and 2",
        7,
        "f",
        "h9",
    )
    assert back.reason.startswith("('shutdown', <object object")
    with pytest.raises(ValueError):
        decode_record(b'{"name": 1}')


def test_library_adds_no_handler_when_embedded(tmp_path):
    """A program that only imports and uses the library finds its logging untouched."""
    script = textwrap.dedent("""
        import logging
        import actors, supervision
        from actors import GenServer, Node
        from actors import smoosh, ioq, replicator, couch_jobs

        class Echo(GenServer):
            def handle_call(self, request, from_):
                logging.getLogger("actors.embedded").warning("from the host")
                return request

        def handlers():  # the root's and those of our own loggers (third parties may add their own)
            loggers = [logging.getLogger()] + [
                l for name, l in logging.Logger.manager.loggerDict.items()
                if isinstance(l, logging.Logger) and name.split(".")[0] in ("actors", "supervision")]
            return {l.name: l.handlers for l in loggers if l.handlers}

        with Node() as node:
            ref = node.spawn(Echo, host="own")
            assert ref.call("hi") == "hi"
            sup = supervision.start_supervisor(node, supervision.SupFlags(), [])
        print("HANDLERS", handlers(), logging.getLogger().level)
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, cwd=str(tmp_path), env=env
    )
    assert out.returncode == 0, out.stderr
    assert "HANDLERS {} 30" in out.stdout  # no handler anywhere, root level still WARNING
    # With no handler configured, Python's last resort shows the host's warning on stderr.
    # Exactly once, unformatted: the host added no handler of its own either.
    assert out.stderr.splitlines().count("from the host") == 1, out.stderr
    assert "WARNING:actors.embedded" not in out.stderr


def test_a_failing_handler_does_not_stop_the_listener(tmp_path):
    class Boom(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == "first":
                raise RuntimeError("handler broke")

    boom, handler = Boom(), Catch()
    logger = logging.getLogger(LOGGER)
    logger.addHandler(boom)
    logger.addHandler(handler)
    listener = LogListener(str(tmp_path))
    forwarder = HostLogForwarder(listener.path)
    try:
        for text in ("first", "second"):
            forwarder.handle(logging.LogRecord(LOGGER, logging.WARNING, __file__, 1, text, None, None))
        assert handler.next(LOGGER).getMessage() == "second"
        assert listener.failed == 1
    finally:
        forwarder.close()
        listener.close()
        logger.removeHandler(boom)
        logger.removeHandler(handler)


def _logging_calls():
    """(path, attribute called, first argument) of every method call in the packages' source."""
    root = Path(__file__).resolve().parents[2]
    for package in ("actors", "supervision"):
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    arg = node.args[0] if node.args else None
                    yield path.relative_to(root).as_posix(), node.func.attr, arg


def test_library_loggers_are_named_under_actors_or_supervision():
    names = []
    for path, call, arg in _logging_calls():
        if call != "getLogger" or arg is None:
            continue
        if isinstance(arg, ast.Name) and arg.id == "__name__":
            continue  # a module of actors/ or supervision/: named under them
        if path == "actors/_core/host/logs.py" and ast.unparse(arg) == "record.name":
            continue  # the listener re-emits a host's record under the host logger's name
        assert isinstance(arg, ast.Constant) and isinstance(arg.value, str), (path, arg)
        names.append(arg.value)
        assert arg.value.split(".")[0] in ("actors", "supervision"), (path, arg.value)
    assert "supervision" in names and "actors.node" in names


def test_only_the_commands_log_setup_and_the_host_forwarder_configure_handlers():
    """The library adds no handler: the commands' setup (`actors.app.logformat`, called by
    the command line) and a host's forwarder to its node are the only ones."""
    configuring = {
        (path, call)
        for path, call, _ in _logging_calls()
        if call in ("basicConfig", "addHandler", "dictConfig", "fileConfig")
    }
    assert configuring <= {("actors/app/logformat.py", "addHandler"), ("actors/_core/host/logs.py", "addHandler")}, (
        configuring
    )
