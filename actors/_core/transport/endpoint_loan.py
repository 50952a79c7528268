"""Lending a process's endpoint to the thread that most of its frames are for.

A call into a host costs a thread hand-off that the raw DEALER/ROUTER round
trip does not pay: the I/O thread reads the frame and wakes the actor's
thread.  In a host the first actor (the one a warm spare was forked for) is
usually the only one, or the one every request goes to (an IOQ server), so
its thread may read the host's endpoint itself while it has nothing to do:
a frame for it is then handled on the thread that received it.

The endpoint is a ZeroMQ socket, which one thread at a time may use.  It
belongs to one of three states, under one lock:

``IO``
    the I/O thread polls it, as in a process with no loan;
``LENT``
    the borrowing thread polls it, and handles what it reads (frames for
    other actors go to their mailboxes, system requests are answered) until
    its own mailbox has something;
``FREE``
    the borrower is running callbacks and nobody reads it.

Only the I/O thread moves between ``IO`` and ``FREE``; only the borrower
between ``FREE`` and ``LENT``.  A borrower busy for longer than `TAKEOVER`
would leave exit signals, ``kill``, system requests and the other actors'
mail waiting, so it arms a timer (a timerfd, armed once per busy spell, not
per message) that wakes the I/O thread, which then takes the endpoint over
and keeps it until the borrower, idle again, asks for it back.  A borrower
about to block on an answer that only the endpoint can bring (a system
request) hands it over at once.  Frames are read by one thread at a time,
each hands on all it read before letting go, so the order of arrival is the
order of handling.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

__all__ = ["EndpointLoan", "LENT_MAIL", "LENT_REFUSED", "LENT_TIMEOUT", "TAKEOVER", "drain", "timers_available"]

#: Seconds a borrower may stay busy before the I/O thread reads for it.
TAKEOVER = 0.001
#: Frames read at most per poll.
DRAIN_BATCH = 2000

# States of the endpoint.
IO = 0
LENT = 1
FREE = 2

# What `EndpointLoan.serve` returns.
LENT_MAIL = 1  # the borrower's mailbox has something
LENT_TIMEOUT = 2  # nothing came in the time given
LENT_REFUSED = 3  # the endpoint is not the borrower's now (or the process stops): wait on the mailbox

_CLOCK_MONOTONIC = 1


def drain(sock: zmq.Socket[bytes], ready: bool) -> list[bytes]:
    """The frames queued on ``sock``, at most `DRAIN_BATCH`, for whichever
    thread reads it now.  ``ready``: a poll has just reported one, so the
    first ``recv`` needs no check.  It stops on the socket's own "nothing
    more" flag, since a raised ``zmq.Again`` costs more than the frame it
    ends (3.7 us against 1.5 us here)."""
    recv = sock.recv
    getsockopt: Callable[[int], int] = sock.getsockopt  # type: ignore[assignment]  # EVENTS is an int option
    frames: list[bytes] = []
    more = ready or bool(getsockopt(zmq.EVENTS) & zmq.POLLIN)
    for _ in range(DRAIN_BATCH):
        if not more:
            break
        try:
            frames.append(recv(zmq.NOBLOCK))
        except zmq.Again:
            break
        more = bool(getsockopt(zmq.EVENTS) & zmq.POLLIN)
    return frames


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _load_timerfd() -> tuple[Any, Any] | None:
    """libc's timerfd calls (Python 3.11 has no ``os.timerfd_*``)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        create, settime = libc.timerfd_create, libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create.argtypes = [ctypes.c_int, ctypes.c_int]
    settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    return create, settime


_timerfd = _load_timerfd()


def timers_available() -> bool:
    """Whether this system can arm the takeover timer (else nothing is lent)."""
    return _timerfd is not None


class _TakeoverTimer:
    """A one-shot timerfd the I/O thread polls."""

    def __init__(self) -> None:
        assert _timerfd is not None
        create, self._settime = _timerfd
        self.fd = create(_CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self._spec = _Itimerspec()
        self._spec_addr = ctypes.addressof(self._spec)

    def arm(self, seconds: float) -> None:
        ns = max(1000, int(seconds * 1e9))
        self._spec.it_value.tv_sec, self._spec.it_value.tv_nsec = divmod(ns, 1_000_000_000)
        self._settime(self.fd, 0, self._spec_addr, None)

    def clear(self) -> None:
        try:
            os.read(self.fd, 8)
        except OSError:  # not expired (a stale wake-up)
            pass

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


class EndpointLoan:
    """The endpoint of ``transport`` lent to one thread.

    ``on_returned`` is called (on the I/O thread) when the I/O thread gives
    the endpoint back after the borrower asked for it: the borrower is then
    blocked on its mailbox and must be woken to take it.
    """

    def __init__(self, transport: Any, on_returned: Callable[[], None], free: bool = False) -> None:
        """``free``: the loan starts with nobody reading (made on the I/O
        thread, which then stops polling the endpoint), so the borrower takes
        it without asking; otherwise the I/O thread reads it until asked."""
        self._transport = transport
        self._on_returned = on_returned
        self.lock = threading.Lock()
        self._released = threading.Condition(self.lock)
        self.state = IO
        self.ended = False
        self.thread_id: int | None = None
        self.timer = _TakeoverTimer()
        #: The borrower is (about to be) blocked in its poll: a put into its
        #: mailbox must `signal` it.
        self.waiting = False
        self._mail_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._wanted = False  # the borrower asked the I/O thread for it back
        self._hand_over = False  # the borrower asked the I/O thread to read for it now
        self._armed = False
        self._busy_since = 0.0
        #: Frames the borrower read itself; times the I/O thread took the
        #: endpoint over (a long callback, a blocking request) and gave it back.
        self.frames_read = 0
        self.takeovers = 0
        self.returns = 0
        if free:
            self.state = FREE
            self._free_from_now()
        self._poller = zmq.Poller()
        self._poller.register(transport.pull, zmq.POLLIN)
        self._poller.register(self._mail_fd, zmq.POLLIN)

    # -- the borrower's side ------------------------------------------------------

    def signal(self) -> None:
        """Wake the borrower out of its poll: its mailbox got something."""
        try:
            os.eventfd_write(self._mail_fd, 1)
        except OSError:
            pass

    def serve(self, timeout: float | None, has_mail: Callable[[], bool]) -> int:
        """Read the endpoint on this thread until ``has_mail()``.

        Returns `LENT_MAIL`, `LENT_TIMEOUT` after ``timeout`` seconds with no
        mail, or `LENT_REFUSED` at once when the I/O thread holds the
        endpoint (it has been asked to give it back, and ``on_returned``
        says when) or the process is stopping.
        """
        if not self._take():
            return LENT_REFUSED
        transport = self._transport
        pull = transport.pull
        poll = self._poller.poll
        mail_fd = self._mail_fd
        handle = transport.handle_lent_frames
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        try:
            while True:
                if has_mail():
                    return LENT_MAIL
                if transport.stopping:
                    return LENT_REFUSED
                self.waiting = True
                if has_mail():
                    return LENT_MAIL
                if deadline is None:
                    ms = -1
                else:
                    ms = int((deadline - time.monotonic()) * 1000.0 + 0.999)
                    if ms <= 0:
                        return LENT_TIMEOUT
                events = poll(ms)
                self.waiting = False
                got_frames = False
                for sock, _ev in events:
                    if sock is pull:
                        got_frames = True
                    else:
                        try:
                            os.eventfd_read(mail_fd)
                        except OSError:
                            pass
                if got_frames:
                    # Everything queued, as the I/O thread drains it: a burst
                    # of requests reaches the mailbox together, and a server
                    # that batches its work per burst sees it as one.
                    frames = drain(pull, True)
                    if frames:
                        self.frames_read += len(frames)
                        handle(frames)
        finally:
            self.waiting = False
            self._release()

    def bind_thread(self) -> None:
        """The calling thread is the borrower (before it first serves)."""
        self.thread_id = threading.get_ident()

    def take_in(self) -> bool:
        """Hand on what has arrived on the endpoint, without waiting; on the
        borrower's thread while it runs a callback (False elsewhere, or when
        the I/O thread reads it now and so hands it on itself).

        A server that acts once its mailbox is drained (IOQ's submit, the
        seed's ``receive ... after 0``) must see as arrived what waits on the
        endpoint, as it would if the I/O thread were reading: true when
        something was handed on.
        """
        if threading.get_ident() != self.thread_id:
            return False
        with self.lock:
            if self.state != FREE or self.ended or self._transport.stopping:
                return False
            self.state = LENT
        frames: list[bytes] = []
        try:
            frames = drain(self._transport.pull, False)
            if frames:
                self.frames_read += len(frames)
                self._transport.handle_lent_frames(frames)
        finally:
            self._release()  # still busy, but reading as it goes: timed from now
        return bool(frames)

    def _take(self) -> bool:
        wake = False
        with self.lock:
            if self.thread_id is None:
                self.thread_id = threading.get_ident()
            if self.ended or self._transport.stopping:
                return False
            if self.state == FREE:
                self.state = LENT
                return True
            if self.state == IO and not self._wanted:
                self._wanted = wake = True
        if wake:
            self._transport.wake()
        return False

    def _release(self) -> None:
        with self.lock:
            if self.state != LENT:
                return
            self.state = FREE
            self._free_from_now()
            if self._transport.stopping:
                self._released.notify_all()

    def _free_from_now(self) -> None:
        """Nobody reads the endpoint from now on until the borrower takes it:
        if it has not within `TAKEOVER`, the I/O thread does (under ``lock``,
        or before the loan is shared).  A ``FREE`` endpoint always has the
        timer armed, or a hand-over asked for."""
        self._busy_since = time.monotonic()
        if not self._armed and not self.ended:
            self._armed = True
            self.timer.arm(TAKEOVER)

    def blocking(self) -> None:
        """The borrower is about to wait for an answer that comes through the
        endpoint: let the I/O thread read it now, not after `TAKEOVER`."""
        if threading.get_ident() != self.thread_id:
            return
        wake = False
        with self.lock:
            if self.state == FREE and not self._hand_over:
                self._hand_over = wake = True
        if wake:
            self._transport.wake()

    def end(self) -> None:
        """The borrower's thread ends: the I/O thread reads for good."""
        with self.lock:
            self.ended = True
            if self.state != IO:
                self._hand_over = True
        self._transport.wake()

    def wait_released(self, timeout: float) -> bool:
        """Until the borrower is out of its poll (the process is stopping)."""
        self.signal()
        with self.lock:
            return self._released.wait_for(lambda: self.state != LENT, timeout)

    def close(self) -> None:
        self.timer.close()
        try:
            os.close(self._mail_fd)
        except OSError:
            pass

    # -- the I/O thread's side ---------------------------------------------------------

    def io_turn(self, timer_fired: bool) -> int:
        """After a turn of the I/O loop: give the endpoint back if the
        borrower asked, take it over if the borrower is busy too long (or
        blocks, or ended).  Returns the state, which says whether the I/O
        thread polls the endpoint next turn."""
        returned = False
        with self.lock:
            state = self.state
            if timer_fired:
                self._armed = False
            if state == IO:
                if self._wanted:
                    self._wanted = False
                    if not self.ended:
                        # The borrower may find mail first and run callbacks
                        # before it takes the endpoint: FREE, so timed.
                        self.state = FREE
                        self._free_from_now()
                        self.returns += 1
                        returned = True
            elif state == FREE:
                if self._hand_over or self.ended:
                    self._hand_over = False
                    self.state = IO
                    self.takeovers += 1
                elif timer_fired:
                    left = self._busy_since + TAKEOVER - time.monotonic()
                    if left <= 0.0:
                        self.state = IO
                        self.takeovers += 1
                    else:
                        self._armed = True
                        self.timer.arm(left)
            state = self.state
        if returned:
            self._on_returned()
        return state
