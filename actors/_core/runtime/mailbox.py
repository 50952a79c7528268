"""Bounded mailboxes: what happens to a message that finds its actor's mailbox full.

An actor's mailbox is unbounded by default, as in Erlang.  Spawned with
``mailbox=N`` it holds at most N user messages (casts, sends, calls; the
kernel's own entries -- exit signals, DOWN, stop -- are never dropped and
never counted), and ``overflow`` says what a message that finds it full
gets:

``"drop_newest"``
    the new message is dropped;
``"drop_oldest"``
    the oldest waiting message is dropped to make room;
``"reject"``
    the new message is dropped, and a call fails with `MailboxFull`;
``"block"``
    the sender waits for room, at most its timeout.

A dropped call always fails with `MailboxFull` (no caller waits for a reply
that cannot come); a dropped cast or send is counted, in the actor's
``dropped`` and the process's ``actors.mailbox.dropped`` counter.

The bound is kept where the mailbox is, so it holds whichever process or
node the sender is in.  A sender to a ``"block"`` mailbox learns that it
must wait from the ref (`ActorRef.blocks`): its messages travel as an
admission request (`Admit`) that the receiver answers once the message is
in the mailbox, so a full mailbox holds the sender back wherever it is,
with at most one message per waiting sender thread parked beside it.
This module is the mailbox itself; the cell wires it to replies and counts.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from actors._core.wire.reasons import Exit

__all__ = [
    "ACCEPTED",
    "Admit",
    "BoundedInbox",
    "DROPPED",
    "MAILBOX_FULL",
    "MailboxFull",
    "MailboxLimit",
    "OVERFLOW_POLICIES",
    "PARKED",
    "mailbox_limit",
]

#: The exit reason a call that found the mailbox full fails with.
MAILBOX_FULL = "mailbox_full"

OVERFLOW_POLICIES = ("drop_newest", "drop_oldest", "reject", "block")

# Wire kinds of user messages (`actors._core.runtime.runtime`: K_INFO, K_CAST, K_CALL).
_USER_KINDS = (0, 1, 2)

# What `BoundedInbox.offer` did with a message.
ACCEPTED = 0
DROPPED = 1
PARKED = 2


class MailboxFull(Exit):
    """A call (or a blocking send that waited its whole timeout) found the
    target's mailbox full; the target is alive and keeps running.  It is an
    `Exit` with reason ``"mailbox_full"``, so code that handles failed calls
    handles it too."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(MAILBOX_FULL, detail or "the actor's mailbox is full")

    def __reduce__(self) -> tuple[Any, ...]:
        return (MailboxFull, (self.detail,))


@dataclass(frozen=True)
class MailboxLimit:
    """A bounded mailbox: at most ``size`` user messages, and the ``overflow`` policy."""

    size: int
    overflow: str = "reject"

    def __post_init__(self) -> None:
        if type(self.size) is not int or self.size < 1:
            raise ValueError(f"mailbox must be a positive int (the most messages it holds), got {self.size!r}")
        if self.overflow not in OVERFLOW_POLICIES:
            raise ValueError(f"overflow must be one of {', '.join(OVERFLOW_POLICIES)}, got {self.overflow!r}")


def mailbox_limit(mailbox: int | None, overflow: str | None) -> MailboxLimit | None:
    """The checked limit of ``spawn(..., mailbox=, overflow=)``; None: unbounded."""
    if mailbox is None:
        if overflow is not None:
            raise ValueError(f"overflow={overflow!r} needs mailbox=N (an unbounded mailbox never overflows)")
        return None
    return MailboxLimit(mailbox, "reject" if overflow is None else overflow)


class Admit:
    """A message for a ``"block"`` mailbox, sent as a call: the receiver
    answers it once the message is in the mailbox (a call: when it is
    answered), or fails it with ``mailbox_full`` after ``timeout``."""

    __slots__ = ("kind", "body", "timeout")

    def __init__(self, kind: int, body: Any, timeout: float | None) -> None:
        self.kind = kind
        self.body = body
        self.timeout = timeout

    def __reduce__(self) -> tuple[Any, ...]:
        return (Admit, (self.kind, self.body, self.timeout))


class BoundedInbox:
    """The mailbox of a bounded actor: the queue its thread reads, with the
    policy applied on the way in.

    ``put`` takes the kernel's own entries, which are never dropped;
    `offer` takes user messages.  Entries are ``(kind, body, from_)``
    tuples; a parked entry also carries the admission (`From`) to answer.
    ``on_admit(entries)`` is told, outside the lock, of parked entries that
    got into the mailbox as the actor took others out.
    """

    def __init__(
        self,
        limit: MailboxLimit,
        on_admit: Callable[[list[tuple[Any, Any]]], None],
        on_put: Callable[[Any], None] | None = None,
    ) -> None:
        self.limit = limit
        #: Told of each entry that got in, outside the lock (an actor on the
        #: scheduler is woken so; one on a thread of its own waits in `get`).
        self._on_put = on_put
        self._size = limit.size
        self._policy = limit.overflow
        self._items: deque[Any] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._on_admit = on_admit
        #: User messages in the mailbox now.
        self.user = 0
        #: ``(entry, admission)`` pairs waiting for room (``"block"``).
        self.parked: deque[tuple[Any, Any]] = deque()
        #: User messages the policy dropped (rejected calls included).
        self.dropped = 0

    # -- queue.SimpleQueue's face, for the actor thread ------------------------

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        with self._cond:
            self._items.append(item)
            self._cond.notify()
        if self._on_put is not None:
            self._on_put(item)

    put_nowait = put

    def put_first(self, item: Any) -> None:
        """A kernel entry handled before everything waiting (never counted)."""
        with self._cond:
            self._items.appendleft(item)
            self._cond.notify()
        if self._on_put is not None:
            self._on_put(item)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        admitted: list[tuple[Any, Any]] = []
        with self._cond:
            items = self._items
            if not items:
                if not block:
                    raise queue.Empty
                if timeout is None:
                    while not items:
                        self._cond.wait()
                else:
                    deadline = time.monotonic() + timeout
                    while not items:
                        left = deadline - time.monotonic()
                        if left <= 0 or not self._cond.wait(left):
                            if not items:
                                raise queue.Empty
            item = items.popleft()
            if type(item) is tuple and item[0] in _USER_KINDS:
                self.user -= 1
                parked = self.parked
                while parked and self.user < self._size:
                    entry, admission = parked.popleft()
                    items.append(entry)
                    self.user += 1
                    admitted.append((entry, admission))
        if admitted:
            self._on_admit(admitted)
        return item

    def get_nowait(self) -> Any:
        return self.get(False)

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)

    # -- the policy ------------------------------------------------------------------

    def offer(self, entry: tuple[int, Any, Any], admission: Any = None) -> tuple[int, Any]:
        """Put a user message in, or not: ``(ACCEPTED, None)``,
        ``(ACCEPTED, victim)`` (drop_oldest dropped ``victim`` for it),
        ``(DROPPED, entry)`` or ``(PARKED, None)``.  ``admission`` (a sender
        that waits for room) lets a ``"block"`` mailbox park the entry."""
        outcome = self._offer(entry, admission)
        if outcome[0] == ACCEPTED and self._on_put is not None:
            self._on_put(entry)
        return outcome

    def _offer(self, entry: tuple[int, Any, Any], admission: Any) -> tuple[int, Any]:
        with self._cond:
            if self.user < self._size and not self.parked:
                self._items.append(entry)
                self.user += 1
                self._cond.notify()
                return ACCEPTED, None
            policy = self._policy
            if policy == "drop_oldest":
                victim = self._take_oldest()
                self._items.append(entry)
                self.user += 1
                self.dropped += 1
                self._cond.notify()
                return ACCEPTED, victim
            if policy == "block" and admission is not None:
                self.parked.append((entry, admission))
                return PARKED, None
            self.dropped += 1
            return DROPPED, entry

    def unpark(self, admission: Any) -> Any:
        """Withdraw the parked entry of ``admission`` (its time ran out):
        the entry, or None when it got in meanwhile."""
        with self._cond:
            for i, (entry, waiting) in enumerate(self.parked):
                if waiting is admission:
                    del self.parked[i]
                    self.dropped += 1
                    return entry
        return None

    def _take_oldest(self) -> Any:
        items = self._items
        for i, item in enumerate(items):
            if type(item) is tuple and item[0] in _USER_KINDS:
                del items[i]
                self.user -= 1
                return item
        return None  # pragma: no cover - full means there is a user entry
