"""Sending signals: in place to an actor of this process, else over the transport.

An actor thread's casts and sends are batched per destination process in
its outbox (`actors._core.runtime.outbox`); every other frame the thread
sends to that process goes out after what it batched, so nothing it sends
overtakes its own casts.  Answers to calls go straight to the caller's
reply channel.
"""

from __future__ import annotations

from typing import Any

from actors._core.runtime.base import RuntimeBase
from actors._core.runtime.context import thread_state
from actors._core.runtime.kinds import K_REPLY, K_REPLY_EXIT
from actors._core.runtime.outbox import CAST_BATCH, CAST_FLUSH_AFTER, Outbox, is_big
from actors._core.wire.codec import encode_frame, is_scalar
from actors._core.wire.ref import From

__all__ = ["Sending"]


class Sending(RuntimeBase):
    """How every signal leaves this runtime."""

    def _send(self, proc: str, kind: int, to: str | None, frm: Any, ref: int | None, body: Any) -> None:
        if proc not in self.dead_procs:
            self._emit(proc, proc, encode_frame(kind, to, frm, ref, self.proc, body))

    def _emit(self, proc: str, dest: str, frame: bytes) -> None:
        """Send ``frame`` to ``dest`` (``proc``'s endpoint or one of its reply
        channels) after whatever this thread has batched for ``proc``."""
        outbox = thread_state.outbox
        if outbox is None:
            self.send_frame(dest, frame)
            return
        with outbox.lock:
            if proc in outbox.batches:
                outbox.flush_locked(proc, self.proc, self.send_frame)
            self.send_frame(dest, frame)

    def route(self, proc: str, kind: int, to: str | None, frm: Any, ref: int | None, body: Any) -> None:
        """Deliver a signal: in place when the target lives here, else over ZeroMQ."""
        if proc == self.proc:
            self._deliver(kind, to, frm, ref, body, self.proc)
        else:
            self._send(proc, kind, to, frm, ref, body)

    # -- cast batching -------------------------------------------------------

    def _post(self, proc: str, kind: int, to: str, body: Any) -> None:
        """A cast or send: batched per destination process on actor threads."""
        cell = thread_state.cell
        if cell is not None and not cell.alive:
            # A killed actor's callback runs on (Python cannot stop it), but
            # a dead process sends nothing.
            return
        if proc == self.proc:
            self._deliver(kind, to, None, None, body, proc)
            return
        outbox = thread_state.outbox
        if outbox is None:  # not an actor thread: sent at once
            self._send(proc, kind, to, None, None, body)
            return
        if proc in self.dead_procs:
            return
        with outbox.lock:
            batch = outbox.batches.get(proc)
            if is_big(body):
                if batch is not None:
                    outbox.flush_locked(proc, self.proc, self.send_frame)
                self.send_frame(proc, encode_frame(kind, to, None, None, self.proc, body))
                return
            if batch is None:
                batch = outbox.new_batch(proc)
                if not outbox.armed:
                    outbox.armed = True
                    self.call_later(CAST_FLUSH_AFTER, lambda: self._flush_stale(outbox))
            batch.items.append([kind, to, body])
            if batch.plain and not is_scalar(body):
                batch.plain = False
            if len(batch.items) >= CAST_BATCH or (outbox.unbatched and proc in outbox.unbatched):
                outbox.flush_locked(proc, self.proc, self.send_frame)

    def _flush_stale(self, outbox: Outbox) -> None:
        """I/O thread: a batch waited too long for its callback to return.

        The I/O thread never waits for the outbox: its owner may hold it
        for as long as a slow link takes a big frame, and the I/O thread
        must keep reading.  A busy outbox is being flushed by its owner,
        or is looked at again a moment later."""
        if not outbox.lock.acquire(blocking=False):
            self.call_later(CAST_FLUSH_AFTER, lambda: self._flush_stale(outbox))
            return
        try:
            outbox.armed = False  # a cast from now on arms a timer of its own
            if not outbox.closed:
                outbox.flush_all_locked(self.proc, self.send_frame)
        finally:
            outbox.lock.release()

    def flush_outbox(self, outbox: Outbox) -> None:
        """Send what an actor's thread left batched, from any thread: the
        death of an actor handled on another thread (a ``kill``) must not
        overtake the casts and sends it made before it died."""
        with outbox.lock:
            if not outbox.closed:
                outbox.flush_all_locked(self.proc, self.send_frame)

    def flush_casts(self) -> None:
        """Send what this thread's casts left batched: when an actor's
        callback returns, and before the thread blocks in the kernel."""
        outbox = thread_state.outbox
        if outbox is not None and outbox.batches:
            self.flush_outbox(outbox)

    def end_actor_thread(self) -> None:
        """An actor thread ends: flush, close its outbox, pool its sockets."""
        outbox = thread_state.outbox
        if outbox is not None:
            with outbox.lock:
                outbox.flush_all_locked(self.proc, self.send_frame)
                outbox.closed = True
            thread_state.outbox = None
        self.transport.release_thread_sockets()

    # -- answers to calls ------------------------------------------------------

    def reply(self, from_: From, value: Any) -> None:
        self._answer(from_, K_REPLY, value)

    def reply_exit(self, from_: From, reason: Any) -> None:
        self._answer(from_, K_REPLY_EXIT, reason)

    def _answer(self, from_: From, kind: int, value: Any) -> None:
        channel = from_.channel
        if channel is None:
            self.route(from_.proc, kind, None, None, from_.ref, value)
            return
        proc = from_.proc
        if proc in self.dead_procs:
            return
        self._emit(proc, channel, encode_frame(kind, None, None, from_.ref, self.proc, value))
