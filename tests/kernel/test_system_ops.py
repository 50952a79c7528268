"""System operations between runtimes: one typed record each, used by both ends.

Pure: the records and their wire form, and a runtime that is built but never
started answering frames handed to it as its transport would.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from actors._core.runtime.kinds import K_REPLY, K_REPLY_EXIT, K_SYS
from actors._core.runtime.runtime import Runtime
from actors._core.wire import system as sysop
from actors._core.wire.codec import decode_frame, encode_frame

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]


def _sample(field: dataclasses.Field) -> object:
    return {"orig_ref": 7, "pid": 42, "own": True, "flag": False, "payload": b"\x00pickled"}.get(field.name, "v")


@pytest.mark.parametrize("op", sorted(sysop.OPS))
def test_every_operation_survives_a_frame_as_itself(op):
    cls = sysop.OPS[op]
    msg = cls(*[_sample(f) for f in dataclasses.fields(cls)])
    body = decode_frame(encode_frame(K_SYS, None, None, 1, "h1", sysop.encode(msg)))[5]
    assert sysop.decode(body) == msg


def test_the_wire_form_is_the_name_and_the_arguments_in_order():
    assert sysop.encode(sysop.ProcDown("h3", "killed")) == ("proc_down", ("h3", "killed"))
    assert sysop.encode(sysop.Halt()) == ("halt", ())


def test_each_name_is_one_operation():
    assert len({cls.OP for cls in sysop.OPS.values()}) == len(sysop.OPS)
    assert all(sysop.OPS[name].OP == name for name in sysop.OPS)


def _sys_calls_with_a_string_op(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"sys_request", "sys_request_then", "sys_send", "register_sys", "register_sys_later"}
        ):
            args = node.args[1:2] if node.func.attr.startswith("sys_") else node.args[:1]
            if any(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_sender_or_handler_names_an_operation_by_a_string():
    paths = [p for d in ("actors", "supervision", "tests", "bench") for p in (ROOT / d).rglob("*.py")]
    assert [hit for p in paths for hit in _sys_calls_with_a_string_op(p)] == []


@pytest.fixture
def rt(tmp_path):
    runtime = Runtime("sysop-test", str(tmp_path), "h1", node_proc="n")
    sent: list[tuple[str, bytes]] = []
    runtime.send_frame = lambda dest, frame, wait=0.0: sent.append((dest, frame))  # type: ignore[method-assign]
    runtime.sent = sent
    yield runtime
    runtime.shutdown()


def _answers(rt):
    return [decode_frame(frame) for _dest, frame in rt.sent]


def test_a_handler_gets_the_record_and_its_return_is_the_answer(rt):
    rt.register_sys(sysop.Whereis, lambda src, m: f"{src} asks for {m.name}")
    rt.handle_frames([encode_frame(K_SYS, None, None, 5, "h2", sysop.encode(sysop.Whereis("db")))])
    [(kind, _to, _frm, ref, _src, body)] = _answers(rt)
    assert (kind, ref, body) == (K_REPLY, 5, "h2 asks for db")


def test_an_unknown_operation_and_wrong_arguments_are_answered_as_failures(rt):
    rt.handle_frames(
        [
            encode_frame(K_SYS, None, None, 1, "h2", ("no_such_op", ())),
            encode_frame(K_SYS, None, None, 2, "h2", ("alive", ("a", "b", "c"))),
        ]
    )
    unknown, wrong = _answers(rt)
    assert (unknown[0], unknown[3], list(unknown[5])) == (K_REPLY_EXIT, 1, ["unknown_system_request", "no_such_op"])
    assert (wrong[0], wrong[3], wrong[5][0]) == (K_REPLY_EXIT, 2, "error")


def test_a_local_request_runs_the_handler_in_place(rt):
    assert rt.sys_request(rt.proc, sysop.Alive("h1.1")) is False
