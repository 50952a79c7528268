"""A supervisor's children as records, and what ``which_children`` and ``count_children`` answer about them.

The supervisor (`supervision._supervisor`) owns the records and changes them
on its own thread; these are the read-only views OTP's ``supervisor`` module
gives of them, kept apart so the supervisor's module is the policy's
carrying-out only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Hashable, NamedTuple

from actors import ActorRef
from supervision._policy import RESTARTING, RUNNING, STOPPED, ChildRecord, ChildStatus
from supervision._spec import ChildSpec

__all__ = ["Child", "ChildInfo", "count_children", "which_children"]


class ChildInfo(NamedTuple):
    """One row of `which_children`: ``child`` is a ref, ``"restarting"`` or None."""

    id: Hashable
    child: ActorRef | str | None
    type: str
    modules: list[str] | str  # or "dynamic", as OTP's


@dataclass
class Child:
    spec: ChildSpec
    ref: ActorRef | None = None
    status: ChildStatus = STOPPED
    starts: int = 0
    last_exit: Any = None

    def record(self) -> ChildRecord:
        return ChildRecord(self.spec.id, self.spec.restart, self.status, self.spec.significant)


def which_children(children: Sequence[Child], dynamic: bool) -> list[ChildInfo]:
    """OTP ``which_children``: one row per child; the children of a
    simple_one_for_one (``dynamic``) have no ids of their own."""
    rows = []
    for child in children:
        if child.status == RUNNING:
            shown: Any = child.ref
        elif child.status == RESTARTING:
            shown = "restarting"
        else:
            shown = None
        spec = child.spec
        rows.append(ChildInfo(None if dynamic else spec.id, shown, spec.type, spec.module_names))
    return rows


def count_children(children: Sequence[Child], dynamic: bool) -> dict[str, int]:
    """OTP ``count_children``: a simple_one_for_one has one spec, its template."""
    return {
        "specs": 1 if dynamic else len(children),
        "active": sum(1 for c in children if c.status == RUNNING),
        "supervisors": sum(1 for c in children if c.spec.type == "supervisor"),
        "workers": sum(1 for c in children if c.spec.type == "worker"),
    }
