"""Exceptions for OTP's supervisor error results.

OTP's ``supervisor`` answers many calls with ``{error, Term}`` tuples
(``already_started``, ``already_present``, ``running``, ``restarting``,
``not_found``, ``simple_one_for_one``, start errors, bad specs).  Here each
result is an exception class so a caller can catch exactly the outcome it
expects.  They are raised in the supervisor's process and re-raised in the
caller's, so every class pickles back to an equal exception: ``__reduce__``
returns the constructor arguments rather than the formatted message.
"""

from __future__ import annotations

from typing import Any, Hashable

__all__ = [
    "SupervisorError",
    "AlreadyStarted",
    "AlreadyPresent",
    "Running",
    "Restarting",
    "NotFound",
    "SimpleOneForOne",
    "StartError",
    "InvalidChildSpec",
    "InvalidSupFlags",
]


class SupervisorError(Exception):
    """Base class of every error a supervisor reports.

    Subclasses pass their constructor arguments to ``_keep`` so that pickling
    rebuilds them through ``__init__`` (the formatted message alone would
    lose the attributes when the exception crosses a process boundary).
    """

    _init_args: tuple[Any, ...] = ()

    def _keep(self, *init_args: Any) -> None:
        self._init_args = init_args

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), self._init_args)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, SupervisorError)
        return self._init_args == other._init_args

    def __hash__(self) -> int:
        return hash((type(self), self.args))


class AlreadyStarted(SupervisorError):
    """``start_child`` for an id whose child is running (OTP ``{already_started, Pid}``).

    ``ref`` is the running child's reference, so the caller can use it
    instead of treating the call as a failure.
    """

    def __init__(self, ref: Any, child_id: Hashable = None) -> None:
        self.ref = ref
        self.child_id = child_id
        self._keep(ref, child_id)
        which = "" if child_id is None else f" {child_id!r}"
        super().__init__(f"child{which} already started: {ref!r}")


class _ChildIdError(SupervisorError):
    """An error about one child, identified by its id."""

    _what = ""

    def __init__(self, child_id: Hashable) -> None:
        self.child_id = child_id
        self._keep(child_id)
        super().__init__(f"child {child_id!r} {self._what}")


class AlreadyPresent(_ChildIdError):
    """``start_child`` for an id whose spec is kept but not running (OTP ``already_present``)."""

    _what = "is already present (spec kept, not running); use restart_child or delete_child"


class Running(_ChildIdError):
    """``restart_child``/``delete_child`` on a running child (OTP ``running``)."""

    _what = "is running"


class Restarting(_ChildIdError):
    """``restart_child``/``delete_child`` on a child the supervisor is retrying (OTP ``restarting``)."""

    _what = "is being restarted by its supervisor"


class NotFound(_ChildIdError, LookupError):
    """No child with that id or ref under this supervisor (OTP ``not_found``)."""

    _what = "not found"


class SimpleOneForOne(SupervisorError):
    """Operation not valid for a simple_one_for_one supervisor (OTP ``simple_one_for_one``).

    ``delete_child`` and ``restart_child`` are invalid there, and
    ``terminate_child`` needs the child's ref rather than the template id.
    """

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self._keep(operation)
        super().__init__(f"{operation} is not valid for a simple_one_for_one supervisor")


class StartError(SupervisorError):
    """A child failed to start; names the child and the reason.

    Raised by ``start_child`` (OTP ``{error, {Reason, Child}}``) and as the
    failure of a supervisor whose init children did not all start (OTP
    ``{shutdown, {failed_to_start_child, Id, Reason}}``).
    """

    def __init__(self, child_id: Hashable, reason: Any) -> None:
        self.child_id = child_id
        self.reason = reason
        self._keep(child_id, reason)
        super().__init__(f"failed to start child {child_id!r}: {reason!r}")


class _InvalidValue(SupervisorError, ValueError):
    """A bad field of a frozen spec; the message names the field and the value."""

    _kind = ""

    def __init__(self, field: str, value: Any, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        self._keep(field, value, problem)
        super().__init__(f"{self._kind} {field}: {value!r} {problem}")


class InvalidChildSpec(_InvalidValue):
    """A child spec (or a list of them) failed validation.

    Example message: ``ChildSpec restart: 'sometimes' is not one of
    permanent, transient, temporary``.
    """

    _kind = "ChildSpec"


class InvalidSupFlags(_InvalidValue):
    """Supervisor flags failed validation; names the field and the value."""

    _kind = "SupFlags"
