"""Test actors that report what happens to them through queues or calls."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from actors import ActorRef, CallTimeout, Continue, Exit, GenServer, Stop, ignore, noreply


def wait_held(ref: ActorRef, n: int = 1, timeout: float = 10.0) -> None:
    """Until ``ref`` (an `Echo`) holds ``n`` unanswered calls.

    Calls from two threads travel on two sockets, so a later call from the
    test thread may overtake a "hold" from another thread: ask the server.
    """
    deadline = time.monotonic() + timeout
    for _ in range(100_000):
        if ref.call("held") >= n:
            return
        if time.monotonic() > deadline:
            break
    raise AssertionError(f"{ref!r} never held {n} calls")


def call_in_thread(ref: ActorRef, request: Any, timeout: float, results: "queue.Queue[Any]") -> threading.Thread:
    """``ref.call(request)`` on a thread of its own (started, returned); how
    it ended goes to ``results``: ``"answered"``, the `Exit` reason, or
    ``"timeout"``."""

    def run() -> None:
        try:
            ref.call(request, timeout=timeout)
            results.put("answered")
        except Exit as exc:
            results.put(exc.reason)
        except CallTimeout:
            results.put("timeout")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def held_call_reasons(ref: ActorRef, end: Callable[[], None]) -> list[Any]:
    """Run ``end`` while a ``"hold"`` call to ``ref`` (an `Echo`) waits on
    another thread; how that call ended (see `call_in_thread`), or nothing
    when it had not ended within 10 s."""
    results: queue.Queue[Any] = queue.Queue()
    thread = call_in_thread(ref, "hold", 20, results)
    wait_held(ref)
    end()
    thread.join(10)
    return [results.get_nowait() for _ in range(results.qsize())]


class Echo(GenServer):
    """Replies with what it gets; records infos and casts for inspection."""

    def init(self, *args: Any) -> None:
        self.seen: list[Any] = []
        self.pending: list[Any] = []

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "seen":
            return list(self.seen)
        if request == "hold":
            self.pending.append(from_)
            return noreply
        if request == "held":
            return len(self.pending)
        if request == "release":
            for f in self.pending:
                self.reply(f, "late")
            self.pending.clear()
            return "released"
        if request == "crash":
            raise ValueError("boom")
        if request == "pid":
            import os

            return os.getpid()
        if isinstance(request, tuple) and request[0] == "trap":
            self.trap_exit = request[1]
            return "ok"
        if isinstance(request, tuple) and request[0] == "link":
            self.link(request[1])
            return "ok"
        if isinstance(request, tuple) and request[0] == "monitor":
            return self.monitor(request[1])
        if isinstance(request, tuple) and request[0] == "spawn_link":
            return self.spawn_link(request[1], *request[2:])
        if isinstance(request, tuple) and request[0] == "stop_with_reply":
            return Stop(request[1], reply="bye")
        return request

    def handle_cast(self, request: Any) -> None:
        self.seen.append(("cast", request))

    def handle_info(self, message: Any) -> None:
        self.seen.append(message)


class Probe(GenServer):
    """Lives in the test process; pushes every info message into a queue."""

    def init(self, q: "queue.Queue[Any]", trap: bool = False) -> None:
        self.q = q
        self.trap_exit = trap

    def handle_info(self, message: Any) -> None:
        self.q.put(message)

    def handle_call(self, request: Any, from_: Any) -> Any:
        op, *args = request
        if op == "link":
            try:
                self.link(args[0])
            except Exception as exc:  # report what link raised
                return ("raised", getattr(exc, "reason", exc))
            return "ok"
        if op == "unlink":
            self.unlink(args[0])
            return "ok"
        if op == "monitor":
            return self.monitor(args[0])
        if op == "monitor_nowait":
            return self.monitor(args[0], wait=False)
        if op == "demonitor":
            return self.demonitor(args[0])
        if op == "spawn_link":
            return self.spawn_link(args[0], *args[1:])
        if op == "spawn_link_on":
            return self.spawn_link(args[0], *args[2:], host=args[1])
        if op == "send_after":
            return self.send_after(args[0], args[1])
        if op == "cancel":
            return self.cancel_timer(args[0])
        if op == "trap":
            self.trap_exit = args[0]
            return "ok"
        raise ValueError(request)

    def terminate(self, reason: Any) -> None:
        self.q.put(("terminated", reason))


class Terminating(GenServer):
    """Reports terminate through a queue (so only for the test process)."""

    def init(self, q: "queue.Queue[Any]", trap: bool = False) -> None:
        self.q = q
        self.trap_exit = trap

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "stop_self":
            self.stop("normal")
            return "stopping"
        if request == "stop_with_reply":
            return Stop("normal", reply="bye")
        if request == "crash":
            raise RuntimeError("crashed on purpose")
        return request

    def handle_info(self, message: Any) -> None:
        self.q.put(("info", message))

    def terminate(self, reason: Any) -> None:
        self.q.put(("terminated", reason))


class ContinueOrder(GenServer):
    def init(self) -> Any:
        self.order: list[str] = []
        self.ref.send("queued-before-continue")
        return Continue("first")

    def handle_continue(self, arg: Any) -> None:
        self.order.append(f"continue:{arg}")

    def handle_info(self, message: Any) -> None:
        self.order.append(f"info:{message}")

    def handle_call(self, request: Any, from_: Any) -> Any:
        return list(self.order)


class Ignoring(GenServer):
    def init(self) -> Any:
        return ignore


class FailingInit(GenServer):
    def init(self) -> Any:
        raise KeyError("no such thing")


class Linker(GenServer):
    """Links to a target at init, optionally trapping; reports through calls."""

    def init(self, target: Any, trap: bool = False) -> None:
        self.trap_exit = trap
        self.got: list[Any] = []
        self.link(target)

    def handle_info(self, message: Any) -> None:
        self.got.append(message)

    def handle_call(self, request: Any, from_: Any) -> Any:
        return list(self.got)


class Scripted(GenServer):
    """Runs the step lists it is called or cast with, for ordering tests.

    Steps: ``("call", ref, request)`` (the outcome goes to the report),
    ``("cast", ref, request)``, ``("send", ref, message)``, ``("reply_then",
    what)`` (answers the current call, then ``what``: ``"crash"``, ``"exit"``
    or ``("send", ref, message)``), ``("crash",)``, ``("wait", event)``.
    What it learns goes to ``report`` (an actor ref) as ``("seen", x)``.
    """

    def init(self, report: ActorRef | None = None, trap: bool = False) -> None:
        self.report = report
        self.trap_exit = trap

    def _run(self, steps: list[Any], from_: Any = None) -> Any:
        for step in steps:
            op = step[0]
            if op == "call":
                try:
                    outcome = ("reply", step[1].call(step[2], timeout=10))
                except Exception as exc:  # the outcome is what is reported
                    outcome = ("raised", getattr(exc, "reason", repr(exc)))
                if self.report is not None:
                    self.report.send(("seen", outcome))
            elif op == "cast":
                step[1].cast(step[2])
            elif op == "send":
                step[1].send(step[2])
            elif op == "link":
                self.link(step[1])
            elif op == "reply_then":
                self.reply(from_, "the reply")
                what = step[1]
                if what == "crash":
                    raise RuntimeError("crash after replying")
                if what == "exit":
                    return Stop("bye")
                if what[0] == "send":
                    what[1].send(what[2])
            elif op == "crash":
                raise RuntimeError("crash in the middle of a batch")
            elif op == "wait":
                step[1].wait(10)
        return noreply if from_ is not None else None

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "ping":
            return "pong"
        return self._run(request, from_)

    def handle_cast(self, request: Any) -> Any:
        return self._run(request)

    def handle_info(self, message: Any) -> None:
        if self.report is not None:
            self.report.send(("seen", message))


class Gate(GenServer):
    """Holds ``"wait"`` calls until ``"open"``; tells the test a call is held."""

    def init(self, q: "queue.Queue[Any]") -> None:
        self.q = q
        self.waiting: list[Any] = []
        self.opened = False

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "wait":
            if self.opened:
                return "open"
            self.waiting.append(from_)
            self.q.put("held")
            return noreply
        if request == "open":
            self.opened = True
            for waiter in self.waiting:
                self.reply(waiter, "open")
            self.waiting.clear()
            return "ok"
        raise ValueError(request)


class MailboxWatcher(GenServer):
    """Notes, for every cast, send and ``"note"`` call it gets, whether its
    mailbox looked empty then (`GenServer.mailbox_empty`); ``"seen"`` answers
    the notes so far."""

    def init(self) -> None:
        self.notes: list[tuple[Any, bool]] = []

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "seen":
            return list(self.notes)
        empty = self.mailbox_empty()
        self.notes.append((request, empty))
        return empty

    def handle_cast(self, request: Any) -> None:
        self.notes.append((request, self.mailbox_empty()))

    def handle_info(self, message: Any) -> None:
        self.notes.append((message, self.mailbox_empty()))
