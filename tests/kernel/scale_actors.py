"""Actors for the scheduler's tests: many of them in one host, handlers that block."""

from __future__ import annotations

import threading
import time
from typing import Any

from actors import ActorRef, Exit, From, GenServer, Timeout, noreply
from supervision import ChildSpec, SupFlags, count_children, start_child, start_supervisor, which_children


class Idle(GenServer):
    """Does nothing until asked; answers with what it is asked."""

    def handle_call(self, request: Any, from_: From) -> Any:
        return request


class Sleeper(GenServer):
    """Blocks outside the kernel: ``time.sleep`` for the seconds it is asked."""

    def handle_call(self, request: Any, from_: From) -> Any:
        time.sleep(request)  # the block under test: a handler stuck in foreign code
        return "slept"


class Slow(GenServer):
    """Answers every call ``request`` seconds after it came, all of them concurrently."""

    def handle_call(self, request: Any, from_: From) -> Any:
        self.send_after(request, ("answer", from_))
        return noreply

    def handle_info(self, message: Any) -> None:
        self.reply(message[1], "late")


class Asker(GenServer):
    """Blocks in the kernel: a call to ``slow`` for each call it gets."""

    def init(self, slow: ActorRef) -> None:
        self.slow = slow

    def handle_call(self, request: Any, from_: From) -> Any:
        return self.slow.call(request, timeout=30)


class Link(GenServer):
    """One link of a chain of synchronous calls: its depth below."""

    def init(self, below: ActorRef | None) -> None:
        self.below = below

    def handle_call(self, request: Any, from_: From) -> Any:
        return 1 if self.below is None else 1 + self.below.call(request, timeout=60)


class Peer(GenServer):
    """Calls its peer when asked to: a ring of them is a cycle of calls."""

    def init(self) -> None:
        self.peer: ActorRef | None = None

    def handle_call(self, request: Any, from_: From) -> Any:
        if request[0] == "peer":
            self.peer = request[1]
            return "ok"
        assert self.peer is not None
        try:
            return ("answer", self.peer.call(("go",), timeout=20))
        except Exit as exc:  # the CallCycle, where the cycle closes
            return ("failed", type(exc).__name__, exc.reason)


class Sleepy(GenServer):
    """Returns ``Timeout(seconds)`` from the cast that arms it, and notes in
    ``lateness`` (a list shared with the spawner, in the same process) how
    long after that its timeout came."""

    def init(self, lateness: list[float]) -> None:
        self.lateness = lateness
        self.set_at = 0.0

    def handle_cast(self, seconds: float) -> Timeout:
        self.set_at = time.monotonic()
        return Timeout(seconds)

    def handle_call(self, request: Any, from_: From) -> Any:
        return request

    def handle_info(self, message: Any) -> None:
        if message == "timeout":
            self.lateness.append(time.monotonic() - self.set_at)


class Sink(GenServer):
    """Counts casts into ``progress[0]``; the first one holds it until ``gate``
    opens, so the whole backlog builds behind that turn; ``drained`` is set
    at the ``total``-th.  (All are shared with the spawner: an actor spawned
    in its own process takes its arguments as they are.)"""

    def init(self, gate: threading.Event, progress: list[int], total: int, drained: threading.Event) -> None:
        self.gate = gate
        self.progress = progress
        self.total = total
        self.drained = drained

    def handle_cast(self, message: Any) -> None:
        if not self.progress[0]:
            self.gate.wait(60)
        self.progress[0] += 1
        if self.progress[0] == self.total:
            self.drained.set()


class Hanger(GenServer):
    """A callback that runs on while it is killed, then tries to send."""

    def init(self, gate: threading.Event, report: Any) -> None:
        self.gate = gate
        self.report = report

    def handle_cast(self, message: Any) -> None:
        self.report.put("in callback")
        self.gate.wait(20)
        self.report.put("callback over")
        self.report_to.cast("sent after death")

    def handle_call(self, request: Any, from_: From) -> Any:
        self.report_to = request
        return "ok"


class Boss(GenServer):
    """Lives in a host and drives many actors there (spawned from inside it,
    so they are that host's), answering with refs, counts and timings."""

    def init(self) -> None:
        self.refs: list[ActorRef] = []
        #: How late each `Sleepy` spawned here got its timeout.
        self.lateness: list[float] = []

    def handle_call(self, request: Any, from_: From) -> Any:
        op = request[0]
        if op == "spawn":
            _, cls, n, args = request
            if cls is Sleepy:
                args = (self.lateness,)
            started = time.perf_counter()
            self.refs = [self.spawn(cls, *args) for _ in range(n)]
            return len(self.refs), time.perf_counter() - started
        if op == "arm":  # every actor spawned returns Timeout(seconds)
            started = time.monotonic()
            for ref in self.refs:
                ref.cast(request[1])
            return time.monotonic() - started
        if op == "fired":  # how many timeouts came, and the longest one took
            return len(self.lateness), max(self.lateness, default=0.0)
        if op == "refs":
            return list(self.refs[: request[1]])
        if op == "ask_all":  # every actor answers; a sample of what they said
            return [ref.call(i, timeout=10) for i, ref in enumerate(self.refs)][-3:]
        if op == "chain":
            below = None
            for _ in range(request[1]):
                below = self.spawn(Link, below)
            assert below is not None
            return below.call("depth", timeout=60)
        if op == "backlog":
            _, n = request
            gate, drained = threading.Event(), threading.Event()
            progress = [0]
            sink = self.spawn(Sink, gate, progress, n, drained)
            other = self.spawn(Idle)
            for i in range(n):
                sink.cast(i)
            gate.set()
            pings = []
            backlog_at_first_ping = n - progress[0]
            for _ in range(2_000):  # while the backlog drains
                if progress[0] >= n:
                    break
                started = time.perf_counter()
                other.call("ping")
                pings.append(time.perf_counter() - started)
            drained.wait(60)
            return backlog_at_first_ping, progress[0], sorted(pings)
        if op == "sup":  # a simple_one_for_one supervisor of n children
            _, n = request
            self.sup = start_supervisor(
                self, SupFlags("simple_one_for_one", intensity=1_000_000, period=60), [ChildSpec("w", (Idle, ()))]
            )
            self.children = [start_child(self.sup, []) for _ in range(n)]
            return len(self.children)
        if op == "kill_children":  # kill every k-th child; their refs
            killed = self.children[:: request[1]]
            for ref in killed:
                self.exit(ref, "kill")
            return killed
        if op == "sup_view":  # what the supervisor says, and how long it took to say it
            started = time.perf_counter()
            counts = count_children(self.sup, timeout=30)
            counted = time.perf_counter() - started
            started = time.perf_counter()
            refs = {info.child for info in which_children(self.sup, timeout=30)}
            listed = time.perf_counter() - started
            return counts, counted, listed, [ref in refs for ref in request[1]], len(refs)
        raise ValueError(request)
