"""One actor's generic gen_server loop: the `Cell`.

The cell's ``_handle`` is the one generic loop of OTP's ``gen_server.erl``: it
receives, dispatches to the thin user callbacks (`actors._core.cell.gen_server`)
through a single wrapper that turns every exception or odd return into a stop
reason, sends replies, and terminates.

A `Cell` is built in layers, each module one job: the thread that runs
this loop (`actors._core.cell.thread`), the state and mailbox senders see
(`actors._core.cell.state`), signals and death (`actors._core.cell.signals`),
and here the loop, which only the actor's own thread runs.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from time import perf_counter
from typing import Any, Callable

from actors._core.cell.entries import M_BATCH, M_CONTINUE, M_DOWN, M_EXIT, M_WAKE
from actors._core.cell.signals import CellSignals
from actors._core.cell.sysmsg import SysRequest, answer
from actors._core.cell.thread import ActorThread, PooledActor
from actors._core.runtime.meter import CALL_BOUNDS
from actors._core.runtime.runtime import K_CALL, K_CAST, K_INFO, K_STOP
from actors._core.wire.reasons import Continue, Exit, Stop, Timeout, crash_from, ignore, is_normal_exit, noreply
from actors._core.wire.ref import From

__all__ = ["Cell"]

log = logging.getLogger("actors")

_TRUNCATE = 2000


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _TRUNCATE else text[:_TRUNCATE] + "..."


class Cell(CellSignals):
    """The kernel side of one actor: its state, signals and generic loop."""

    __slots__ = ()

    def start(self, run_on: Callable[[Callable[[], None]], None] | None = None, here: bool = False) -> None:
        """Start the actor: on the scheduler, on a thread of its own, through
        ``run_on`` (a thread started ahead of time, see
        `actors._core.cell.spawn.WarmThread`), or -- ``here``, for an actor on
        the scheduler -- by running ``init`` on the calling thread, which
        waits for it anyway."""
        self.runtime.cells[self.id] = self
        runner = self._thread
        if run_on is not None and isinstance(runner, ActorThread):
            run_on(runner.run)
        elif here and isinstance(runner, PooledActor):
            runner.boot_here()
        else:
            runner.start()

    # -- the generic loop (actor thread) ------------------------------------------------

    def _boot(self) -> None:
        """Register, run ``init``, tell the spawner, then ``handle_continue``."""
        if self.name is not None:
            try:
                holder = self.claim_name(self.name)
            except Exception as exc:  # registry unreachable
                self._fail_start(("error", crash_from(exc)))
                return
            if holder is not None:
                self._fail_start(("already_registered", holder))
                return
        try:
            result = self.server._gen_init(*self._args, **self._kwargs)
        except Exit as exc:
            self._fail_start(("error", exc.reason))
            return
        except BaseException as exc:  # noqa: BLE001 - any init failure is a start error
            self._fail_start(("error", crash_from(exc)))
            return
        if result is ignore:
            self._fail_start(("ignore", None))
            return
        if isinstance(result, Stop):
            self._fail_start(("error", result.reason))
            return
        self.started = True
        self._args = self._kwargs = None  # type: ignore[assignment]
        on_started, self._on_started = self._on_started, None  # type: ignore[assignment]
        on_started("ok", self.ref)
        if self._stop_requested:
            self._finish(self._stop_reason, run_terminate=True)
        elif isinstance(result, Continue):
            self._thread.first((M_CONTINUE, result.arg, None))
        elif type(result) is Timeout:
            self.idle_timeout = result.seconds

    def _fail_start(self, outcome: tuple[str, Any]) -> None:
        kind, detail = outcome
        with self.lock:
            self.alive = False
            self.links.clear()
            inflight = list(self.inflight.values())
            self.inflight.clear()
        self.exit_reason = "normal" if kind == "ignore" else detail
        if self.name is not None and kind != "already_registered":
            try:
                self.runtime.unregister_name(self.name, self.ref)
            except Exception:
                log.debug("could not unregister %s", self.name)
        self.runtime.meters.retire(self.runtime.cells, self, exited=False)
        for from_ in inflight:
            self.runtime.reply_exit(from_, "noproc")
        self._thread.stop()
        on_started, self._on_started = self._on_started, None  # type: ignore[assignment]
        on_started(kind, detail)
        self._gone()

    def _handle(self, message: tuple[int, Any, Any]) -> None:
        if message[0] == M_BATCH:
            items = message[1]
            left = len(items)
            try:
                for item in items:
                    if not self.alive:
                        return
                    left -= 1
                    self.batch_left = left
                    self._handle_one(item)
            finally:
                self.batch_left = 0
        else:
            self._handle_one(message)

    def _handle_one(self, message: tuple[int, Any, Any]) -> None:
        if not self.alive:
            return
        sys_state = self.sys_state
        if sys_state is not None:  # suspended, counted or traced: it decides
            sys_state.handle(self, message)
        else:
            self._dispatch(message)

    def _dispatch(self, message: tuple[int, Any, Any]) -> None:
        """One entry to the user's callbacks (a system request is answered here, ahead of them)."""
        kind, body, from_ = message
        if kind == K_CALL and type(body) is SysRequest:
            answer(self, body, from_)
            return
        server = self.server
        self.messages_handled += 1
        self.idle_timeout = None  # a message came: the last callback's Timeout is off
        try:
            if kind == K_CALL:
                meter = self.meter
                meter.calls += 1
                started = perf_counter()
                self.serving = from_
                try:
                    result = server.handle_call(body, from_)
                finally:
                    self.serving = None
                took = perf_counter() - started
                meter.call_seconds += took
                meter.buckets[bisect_left(CALL_BOUNDS, took)] += 1
                then: Continue | None = None  # handle_continue after the reply
                if type(result) is Timeout:
                    self.idle_timeout = result.seconds
                    result = result.reply
                elif type(result) is Continue:
                    then, result = result, result.reply
                if isinstance(result, Stop):
                    # No reply given: the call stays in flight and fails
                    # with the exit reason, as OTP's {stop, Reason, State}.
                    reply = None if result.reply is noreply else (from_, result.reply)
                    self._finish(result.reason, run_terminate=True, reply=reply)
                    return
                if result is noreply:
                    pass
                elif self._stop_requested:
                    self._finish(self._stop_reason, run_terminate=True, reply=(from_, result))
                    return
                elif self.alive:
                    self._reply(from_, result)
                    if then is None:
                        return
                if then is not None:
                    result = then
            elif kind == K_CAST:
                self.meter.casts += 1
                result = server.handle_cast(body)
            elif kind == K_INFO:
                result = server.handle_info(body)
            elif kind == M_CONTINUE:
                result = server.handle_continue(body)
            elif kind == M_EXIT:
                sender, reason = body
                if sender is not None and self.parent is not None and sender == self.parent:
                    # A gen_server trapping exits terminates when its parent
                    # (its supervisor) tells it to.
                    self._finish(reason, run_terminate=True)
                    return
                result = server.handle_info(("EXIT", sender, reason))
            elif kind == M_DOWN:
                mref, target, reason = body
                with self.lock:
                    known = self.monitors_out.pop(mref, None) is not None
                if not known:
                    return  # demonitored meanwhile: flushed
                result = server.handle_info(("DOWN", mref, target, reason))
            elif kind == K_STOP:
                self._finish(body, run_terminate=True, stop_reply=from_)
                return
            elif kind == M_WAKE:
                return
            else:
                return
        except Exit as exc:
            self._finish(exc.reason, run_terminate=True)
            return
        except BaseException as exc:  # noqa: BLE001 - the wrapper turns every failure into a reason
            self._finish(crash_from(exc), run_terminate=True, crashed_in=(kind, body))
            return
        if self._stop_requested:
            self._finish(self._stop_reason, run_terminate=True)
        elif isinstance(result, Stop):
            self._finish(result.reason, run_terminate=True)
        elif isinstance(result, Continue) and self.alive:
            self._handle_one((M_CONTINUE, result.arg, None))
        elif type(result) is Timeout:
            self.idle_timeout = result.seconds

    def _reply(self, from_: From, value: Any) -> None:
        with self.lock:
            self.inflight.pop((from_.proc, from_.ref), None)
        self.runtime.reply(from_, value)
        if self.sys_state is not None:
            self.sys_state.replied(from_, value)

    def reply(self, from_: From, value: Any) -> None:
        """Deferred reply (``gen_server:reply``)."""
        if self.alive or from_ in [p[0] for p in self._pending_stop_reply]:
            self._reply(from_, value)

    def request_stop(self, reason: Any) -> None:
        self._stop_requested = True
        self._stop_reason = reason

    def _finish(
        self,
        reason: Any,
        run_terminate: bool,
        reply: tuple[From, Any] | None = None,
        stop_reply: From | None = None,
        crashed_in: tuple[int, Any] | None = None,
    ) -> None:
        """Terminate (in the actor thread), then die and tell everyone."""
        if not self.alive:
            return
        if self.sys_state is not None:
            if reply is not None:
                self.sys_state.replied(reply[0], reply[1])
            self.sys_state.event(("terminate", reason))
        if run_terminate:
            try:
                self.server.terminate(reason)
            except Exit as exc:
                reason = exc.reason
            except BaseException as exc:  # noqa: BLE001
                reason = crash_from(exc)
        if not is_normal_exit(reason):
            # Linked to the actor that started it (its supervisor), it leaves the report with the
            # traceback to that one (`supervision`), as OTP's report_error: one crash, one report.
            with self.lock:
                supervised = self.parent is not None and self.parent in self.links
            tb = getattr(reason, "traceback", "")
            log.log(
                logging.DEBUG if supervised else logging.ERROR,
                "actor %s (%s) terminating: reason=%s last_message=%s%s",
                self.name or self.id,
                type(self.server).__name__,
                _short(reason),
                _short(crashed_in[1]) if crashed_in else None,
                ("\n" + tb[-4000:].rstrip()) if tb else "",
                extra={"event": "actor_terminating", "actor": self.id, "actor_name": self.name, "reason": reason},
            )
        if reply is not None:
            with self.lock:
                self.inflight.pop((reply[0].proc, reply[0].ref), None)
        if stop_reply is not None:
            with self.lock:
                self.inflight.pop((stop_reply.proc, stop_reply.ref), None)
        self.die(reason, reply=reply, stop_reply=stop_reply)
