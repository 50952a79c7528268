"""The kinds of mailbox entry a cell adds to the wire's (`K_CALL`, `K_CAST`, ...).

A mailbox entry is a bare ``(kind, body, from_)`` tuple.  The wire's kinds
come from other processes; these are made in this process, by the cell
itself (a signal turned into a message, a wake-up, a batch), and so never
travel.  They live apart from the cell's modules because the thread, the
signals and the loop all name them.
"""

from __future__ import annotations

from actors._core.runtime.runtime import K_INFO

__all__ = ["ENDPOINT_BACK", "IDLE_TIMEOUT", "M_BATCH", "M_CONTINUE", "M_DOWN", "M_EXIT", "M_IDLE", "M_WAKE"]

#: A trapped exit signal: ``(sender, reason)``, handled as ``("EXIT", sender, reason)``.
M_EXIT = 100
#: A monitor's notice: ``(mref, target, reason)``, handled as ``("DOWN", ...)``.
M_DOWN = 101
#: Wakes the actor's thread and does nothing (its death, the endpoint given back).
M_WAKE = 102
#: ``handle_continue(arg)`` after the callback that asked for it.
M_CONTINUE = 103
#: Several entries of one read of the endpoint, handled in order: ``(M_BATCH, entries, None)``.
M_BATCH = 104
#: An actor on the pool was idle past its callback's `Timeout`: ``(M_IDLE, timer, None)``,
#: handled as `IDLE_TIMEOUT` unless a message came after the timer was set.
M_IDLE = 105
#: What an actor idle past its callback's `Timeout` handles: ``handle_info("timeout")``.
IDLE_TIMEOUT = (K_INFO, "timeout", None)
#: Put in a borrower's mailbox when the I/O thread gives the endpoint back.
ENDPOINT_BACK = (M_WAKE, None, None)
