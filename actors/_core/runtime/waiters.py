"""Waiters: what stands for an outstanding request until its answer comes.

Every pending request (a call, a link or monitor across processes, a system
request) is one waiter in the runtime's ``pending`` table, resolved once with
``resolve(ok, value)`` by whoever learns the outcome first: the answer, a
timeout, or the death of the process it went to.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from time import sleep as _yield
from typing import TYPE_CHECKING, Any

from actors._core.runtime.context import thread_state
from actors._core.runtime.mailbox import MAILBOX_FULL, MailboxFull
from actors._core.wire.reasons import CALL_CYCLE, CallCycle, Exit

if TYPE_CHECKING:  # asyncio is imported by the programs that await calls, not by every host
    import asyncio

__all__ = ["ChannelWaiter", "FutureWaiter", "Waiter", "exit_of"]

log = logging.getLogger("actors.runtime")


def exit_of(reason: Any) -> Exit:
    """The exception a failed request raises: `MailboxFull` for a full
    mailbox, `CallCycle` for a call that would have closed a cycle."""
    if reason == MAILBOX_FULL:
        return MailboxFull()
    if type(reason) is tuple and len(reason) == 2 and reason[0] == CALL_CYCLE:
        return CallCycle(reason[1])
    return Exit(reason)


class ChannelWaiter:
    """A call whose reply goes to the caller's own reply channel.

    The calling thread reads the channel itself; when the target's process
    dies first, whoever learns it resolves the call by sending the failure
    into the same channel (through ``answer(proc, channel, ref, ok, value)``),
    so the caller has one place to wait on.
    """

    __slots__ = ("proc", "answer", "channel", "ref")

    def __init__(self, proc: str, answer: Callable[[str, str, int, bool, Any], None], channel: str, ref: int) -> None:
        self.proc = proc
        self.answer = answer
        self.channel = channel
        self.ref = ref

    def resolve(self, ok: bool, value: Any) -> None:
        self.answer(self.proc, self.channel, self.ref, ok, value)


class FutureWaiter:
    """A call awaited by an asyncio program: resolving it schedules the
    result onto the event loop's thread (no thread waits for it)."""

    __slots__ = ("proc", "loop", "future")

    def __init__(self, proc: str, loop: "asyncio.AbstractEventLoop", future: "asyncio.Future[Any]") -> None:
        self.proc = proc
        self.loop = loop
        self.future = future

    def resolve(self, ok: bool, value: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(self._settle, ok, value)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    def _settle(self, ok: bool, value: Any) -> None:
        if not self.future.done():
            if ok:
                self.future.set_result(value)
            else:
                self.future.set_exception(exit_of(value))


class Waiter:
    """One outstanding request: a lock released by whoever resolves it."""

    __slots__ = ("lock", "proc", "ok", "value", "callback")

    def __init__(self, proc: str | None, callback: Callable[[bool, Any], None] | None = None) -> None:
        self.proc = proc
        self.callback = callback
        self.ok = False
        self.value: Any = None
        self.lock: threading.Lock | None
        if callback is None:
            self.lock = threading.Lock()
            self.lock.acquire()
        else:
            self.lock = None

    def resolve(self, ok: bool, value: Any) -> None:
        if self.callback is not None:
            try:
                self.callback(ok, value)
            except Exception:  # a continuation must never kill the I/O thread
                log.exception("continuation failed")
            return
        self.ok = ok
        self.value = value
        assert self.lock is not None
        self.lock.release()
        worker = thread_state.worker
        if worker is not None and worker.more_to_run():
            # Let the caller have the GIL now: the worker that answered, on
            # to its next turns, would otherwise keep it for the rest of the
            # switch interval (5 ms) while the caller waits to return.
            _yield(0)
