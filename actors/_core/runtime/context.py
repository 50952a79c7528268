"""Thread context: which actor, if any, the calling thread runs.

An actor's thread batches its casts in its own outbox (`Outbox`) and is
known by its cell; any other thread (the host program's, the I/O thread)
has neither.  Kept in one ``threading.local`` read on every send.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from actors._core.runtime.outbox import Outbox

if TYPE_CHECKING:
    from actors._core.cell.cell import Cell

__all__ = ["current_cell", "set_current_cell", "thread_state"]


class _ThreadState(threading.local):
    """Per thread: the actor it runs (None for the host program's threads) and
    its cast batches.  Class-level defaults keep the lookups on a thread that
    is no actor's as cheap as on an actor's: a missing attribute of a
    ``threading.local`` costs an exception caught in C on every call."""

    cell: "Cell | None" = None
    outbox: "Outbox | None" = None
    #: The scheduler's record of this thread when it is one of its workers
    #: (`actors._core.runtime.scheduler.Worker`): a wait in the kernel on it
    #: hands the run queue to a spare.
    worker: "Any" = None
    #: The cast batches of the actors this thread runs turns of (one at a
    #: time, each flushed before its turn ends), made on the first.
    pool_outbox: "Outbox | None" = None


thread_state = _ThreadState()


def current_cell() -> "Cell | None":
    return thread_state.cell


def set_current_cell(cell: "Cell | None") -> None:
    """Make this thread an actor's (or no longer): an actor thread batches
    its casts and sends (see `Runtime.flush_casts`)."""
    outbox = Outbox() if cell is not None else None
    thread_state.cell = cell
    thread_state.outbox = outbox
    if cell is not None:
        cell.outbox = outbox  # so a death handled on another thread can flush it first
