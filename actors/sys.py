"""OTP's ``sys`` for the processes of this runtime: look into and steer any of them.

Every behaviour -- `actors.GenServer`, `actors.GenStatem`, the supervisors
of `supervision` -- answers these, ahead of its own callbacks, from the
process it is in, another process or another node (a ref works anywhere; a
name is looked up on this node).  Each function is one call to the process
and takes the call's ``timeout``; the answer is checked here, so a refused
request raises `SysError` while the process runs on.

- `get_state` / `replace_state`: a server's state is its public attributes
  (a dict); a state machine's is ``(state, data)``.  A supervisor's state
  cannot be replaced (see `replace_state`).
- `get_status`: where the process stands, and its state as its
  ``format_status`` shows it (the hook that hides secrets).
- `suspend` / `resume`: a suspended process handles no user message; what
  arrives is kept in order and handled after ``resume``; system requests
  are answered meanwhile, and a call to it waits (and may time out) as it
  would for a busy server.
- `statistics`: messages in and out, callbacks run, CPU time, since when.
- `trace`: every event in and out, to the ``actors.sys`` logger, to a
  function, or as messages to an actor.

docs/sys.md is the guide.
"""

from __future__ import annotations

from typing import Any, Callable, Literal

from actors._core.cell.sysmsg import SysError, SysRequest
from actors._core.wire.ref import ActorRef
from actors.api import call

__all__ = [
    "SysError",
    "get_state",
    "get_status",
    "replace_state",
    "resume",
    "statistics",
    "suspend",
    "system_call",
    "trace",
]

Target = ActorRef | str
#: How a request is sent: ``call(ref_or_name, request, timeout)`` (`actors.call`, or an attached view's).
Caller = Callable[[Any, Any, "float | None"], Any]


def system_call(
    target: Target, op: str, arg: Any = None, timeout: float | None = 5.0, *, via: Caller | None = None
) -> Any:
    """Send one system request and return its answer, or raise `SysError`.

    ``via`` sends it another way than `actors.call` (``otpy sys`` uses the
    call of a view attached to a running node)."""
    reply = (via or call)(target, SysRequest(op, arg), timeout)
    if not (isinstance(reply, tuple) and len(reply) == 2 and reply[0] in ("ok", "error")):
        raise SysError(f"{target!r} does not answer system requests (it answered {reply!r})")
    if reply[0] == "error":
        raise reply[1]
    return reply[1]


def get_state(target: Target, timeout: float | None = 5.0) -> Any:
    """The process's state: a server's public attributes as a dict, a state
    machine's ``(state, data)``, a supervisor's flags and children."""
    return system_call(target, "get_state", None, timeout)


def replace_state(target: Target, fun: Callable[[Any], Any], timeout: float | None = 5.0) -> Any:
    """Replace the state with ``fun(state)`` and return the new state.

    ``fun`` runs inside the process, between two messages (it travels to a
    process elsewhere, so it must pickle: a module-level function, or a
    lambda cloudpickle can carry).  When it raises, or returns something
    that is not a state of that behaviour, nothing changes and `SysError`
    says why.  A supervisor refuses: its state is the record of live
    processes it has started and linked to, so a replaced one would
    restart, stop or lose track of the wrong processes.
    """
    return system_call(target, "replace_state", fun, timeout)


def get_status(target: Target, timeout: float | None = 5.0) -> dict[str, Any]:
    """Where the process stands: ``ref``, ``name``, ``module``, ``behaviour``,
    ``suspended``, ``parent``, ``trap_exit``, ``mailbox``, ``held``,
    ``handled``, ``statistics``, ``trace``, and what its ``format_status``
    returns (``state``; a state machine's ``data``, ``postponed``,
    ``queued`` and ``timeouts`` too)."""
    return system_call(target, "get_status", None, timeout)


def suspend(target: Target, timeout: float | None = 5.0) -> None:
    """Hold the process's user messages (kept in order) until `resume`."""
    system_call(target, "suspend", None, timeout)


def resume(target: Target, timeout: float | None = 5.0) -> None:
    """Handle what was held, in order, then run as before (a running process: nothing)."""
    system_call(target, "resume", None, timeout)


def statistics(
    target: Target, flag: bool | Literal["get"] = "get", timeout: float | None = 5.0
) -> dict[str, Any] | None:
    """``True`` starts counting (from zero), ``False`` stops, ``"get"`` returns
    the counts (None when off): ``start_time`` and ``current_time`` (wall
    clock), ``messages_in``, ``messages_out`` (replies), ``reductions``
    (callbacks run, a state machine's inserted events and enter calls
    included) and ``cpu_seconds`` (its thread's CPU time in them)."""
    return system_call(target, "statistics", flag, timeout)


def trace(
    target: Target,
    how: bool | Callable[[ActorRef, tuple[Any, ...]], None] | ActorRef,
    timeout: float | None = 5.0,
) -> None:
    """Trace every event in and out of the process, or stop (``False``).

    ``True`` logs each event on the ``actors.sys`` logger (INFO); a function
    is called as ``how(ref, event)`` in the traced process's thread; an
    `ActorRef` is sent ``("trace", ref, event)`` for each.  Events:
    ``("in", "call", request, from_)``, ``("in", "cast", request)``,
    ``("in", "info", message)``, ``("out", reply, to)``, ``("terminate",
    reason)``, and a state machine's ``("consume" | "postpone", event_type,
    content, state, next_state)`` and ``("enter", old_state, state)``."""
    system_call(target, "trace", how, timeout)
