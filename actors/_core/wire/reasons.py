"""Exit reasons, the exceptions that carry them, and the callback markers.

Reasons are plain values, as in Erlang: ``"normal"``, ``"shutdown"``,
``("shutdown", term)``, ``"killed"``, ``"noproc"``, ``"noconnection"``, or a
`Crash` describing an exception.  Keeping them plain lets them cross process
boundaries and be compared in tests and supervisors.
"""

from __future__ import annotations

import traceback as _traceback
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CALL_CYCLE",
    "CallCycle",
    "CallTimeout",
    "Continue",
    "Crash",
    "Exit",
    "INCARNATION_ENDED",
    "IncarnationEnded",
    "NotRegistered",
    "Stop",
    "Timeout",
    "crash_from",
    "ignore",
    "is_normal_exit",
    "noreply",
]

_MAX_TEXT = 4000


@dataclass(frozen=True)
class Crash:
    """The reason of an actor that died because a callback raised."""

    exc_type: str
    message: str
    traceback: str = ""

    def __str__(self) -> str:
        return f"{self.exc_type}: {self.message}"

    def __eq__(self, other: object) -> bool:
        # Tracebacks differ between otherwise identical crashes (line numbers
        # in wrappers); two crashes are the same reason when type and message are.
        if not isinstance(other, Crash):
            return NotImplemented
        return (self.exc_type, self.message) == (other.exc_type, other.message)

    def __hash__(self) -> int:
        return hash((self.exc_type, self.message))


def crash_from(exc: BaseException) -> Crash:
    tb = "".join(_traceback.format_exception(type(exc), exc, exc.__traceback__))
    message = str(exc)
    if len(message) > _MAX_TEXT:
        message = message[:_MAX_TEXT] + "..."
    if len(tb) > _MAX_TEXT * 4:
        tb = tb[-_MAX_TEXT * 4 :]
    return Crash(type(exc).__name__, message, tb)


def is_normal_exit(reason: Any) -> bool:
    """OTP's notion of a normal exit: normal, shutdown, or {shutdown, Term}."""
    if reason == "normal" or reason == "shutdown":
        return True
    return isinstance(reason, tuple) and len(reason) == 2 and reason[0] == "shutdown"


class Exit(Exception):
    """An actor exit observed by a caller (a failed call, a refused stop).

    Raising it inside a callback makes the actor exit with ``reason``, the
    way ``exit(Reason)`` does in Erlang.
    """

    def __init__(self, reason: Any, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(reason, detail)

    def __str__(self) -> str:
        text = f"exit: {self.reason!r}"
        return f"{text} ({self.detail})" if self.detail else text

    def __reduce__(self) -> tuple[Any, ...]:
        return (Exit, (self.reason, self.detail))


class NotRegistered(Exit, ValueError):
    """A message sent to a name nothing is registered under: ``Name ! Msg``
    fails with ``badarg`` in Erlang.  It is an `Exit` with reason ``noproc``,
    as a call to such a name fails, and a `ValueError` (``badarg``)."""

    def __init__(self, name: Any, detail: str = "") -> None:
        super().__init__("noproc", detail or f"no actor is registered as {name!r}")
        self.name = name

    def __reduce__(self) -> tuple[Any, ...]:
        return (NotRegistered, (self.name, self.detail))


#: The exit reason of every actor of a node whose incarnation ended (it found
#: itself on the minority side of a network cut, or a peer declared it down):
#: OTP's ``{shutdown, Term}``, so supervisors neither restart nor report it.
INCARNATION_ENDED = ("shutdown", "incarnation_ended")


class IncarnationEnded(Exit):
    """A spawn or call on a node whose incarnation ended; ``node_id`` names that
    incarnation and ``why`` says why it ended.  Its reason is `INCARNATION_ENDED`.
    It is raised until the node is closed, or replaced by a new incarnation."""

    def __init__(self, node_id: str, why: str) -> None:
        super().__init__(INCARNATION_ENDED, f"incarnation {node_id} has ended: {why}")
        self.node_id = node_id
        self.why = why

    def __reduce__(self) -> tuple[Any, ...]:
        return (IncarnationEnded, (self.node_id, self.why))


#: The first element of a `CallCycle`'s reason: ``("call_cycle", (caller, ..., caller))``.
CALL_CYCLE = "call_cycle"


class CallCycle(Exit):
    """A call that would close a cycle of callers, each waiting for the next
    (A calls B, and B, serving it, calls A), fails at once with this.

    In OTP such a call waits for its timeout (five seconds by default) and
    then fails; nothing else can come of it, since every actor on the cycle
    is blocked.  Each call carries the chain of calls waiting above it (the
    last 16), and the actor it reaches refuses it when that actor is itself
    waiting on one of them.  ``cycle`` names the actors, the first one again
    at the end; the reason is ``("call_cycle", cycle)``."""

    def __init__(self, cycle: Any, detail: str = "") -> None:
        self.cycle = tuple(cycle)
        super().__init__(
            (CALL_CYCLE, self.cycle), detail or "calls that would wait for each other: " + " -> ".join(self.cycle)
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (CallCycle, (self.cycle, self.detail))


class CallTimeout(Exception):
    """A call got no reply within its timeout; the server keeps running."""

    def __init__(self, target: Any = None, timeout: float | None = None) -> None:
        self.target = target
        self.timeout = timeout
        super().__init__(target, timeout)

    def __str__(self) -> str:
        return f"call to {self.target!r} timed out after {self.timeout} s"

    def __reduce__(self) -> tuple[Any, ...]:
        return (CallTimeout, (self.target, self.timeout))


class _Marker:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"actors.{self._name}"

    def __reduce__(self) -> str:
        return self._name


#: Returned from ``handle_call`` when the reply is sent later with ``reply``.
noreply = _Marker("noreply")
#: Returned from ``init`` to give up starting: ``spawn`` returns ``None``.
ignore = _Marker("ignore")


@dataclass(frozen=True)
class Continue:
    """Returned from a callback: run ``handle_continue(arg)`` before any
    message already queued (OTP's ``{continue, Arg}``).  From ``handle_call``,
    ``Continue(arg, reply=value)`` is ``{reply, Reply, State, {continue,
    Arg}}``: the reply goes out first; ``Continue(arg)`` is ``{noreply,
    State, {continue, Arg}}``."""

    arg: Any = None
    reply: Any = noreply


@dataclass(frozen=True)
class Timeout:
    """Returned from a callback: the ``Timeout`` of OTP's return tuples.

    When no message arrives within ``seconds`` after the callback returns,
    ``handle_info("timeout")`` runs; any message that comes first cancels
    it (``0``: unless a message is already waiting).  From ``handle_call``,
    ``Timeout(seconds, reply=value)`` is ``{reply, Reply, State, Timeout}``
    and ``Timeout(seconds)`` is ``{noreply, State, Timeout}`` (answer later
    with ``reply``); from ``init`` it is ``{ok, State, Timeout}``.  ``None``
    is ``infinity``.  A server that is busy never times out: the idle time
    is counted from the last callback, as in OTP."""

    seconds: float | None
    reply: Any = noreply

    def __post_init__(self) -> None:
        s = self.seconds
        if s is not None and (type(s) not in (int, float) or not s >= 0):
            raise ValueError(f"Timeout seconds must be a number >= 0 or None, got {s!r}")


@dataclass(frozen=True)
class Stop:
    """Returned from a callback to stop with ``reason``.

    From ``handle_call``, ``Stop(reason, reply=value)`` is OTP's ``{stop,
    Reason, Reply, State}``: ``value`` is delivered after ``terminate`` has
    run.  Without ``reply`` it is ``{stop, Reason, State}``: no reply is sent,
    so the call fails with ``Exit(reason)`` (unless the server answered it
    already with ``reply``)."""

    reason: Any = "normal"
    reply: Any = noreply
