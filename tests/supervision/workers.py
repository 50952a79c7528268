"""Children for the supervisor tests; they report their lives through a queue."""

from __future__ import annotations

import os
import queue
import threading
from typing import Any

from actors import GenServer, ignore


class Worker(GenServer):
    """Records init/terminate in ``q`` as (event, tag); traps exits so terminate runs."""

    def init(self, q: "queue.Queue[Any] | None", tag: str, *extra: Any) -> None:
        self.q = q
        self.tag = tag
        self.extra = extra
        self.trap_exit = True
        if q is not None:
            q.put(("init", tag))

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "crash":
            raise RuntimeError(f"{self.tag} crashed")
        if request == "stop_normal":
            self.stop("normal")
            return "ok"
        if request == "stop_shutdown_x":
            self.stop(("shutdown", "x"))
            return "ok"
        if request == "pid":
            return os.getpid()
        if request == "cpus":
            return sorted(os.sched_getaffinity(0))
        if request == "extra":
            return self.extra
        return (self.tag, request)

    def handle_info(self, message: Any) -> None:
        return None

    def terminate(self, reason: Any) -> None:
        if self.q is not None:
            self.q.put(("terminate", self.tag))


class Slow(Worker):
    """Takes ``delay`` seconds (bounded) in terminate unless ``gate`` is set."""

    def init(self, q: Any, tag: str, gate: threading.Event, delay: float = 3.0) -> None:
        super().init(q, tag)
        self.gate = gate
        self.delay = delay

    def terminate(self, reason: Any) -> None:
        self.gate.wait(self.delay)
        super().terminate(reason)


class Gated(Worker):
    """init fails while the shared ``attempts`` budget says so."""

    def init(self, q: Any, tag: str, plan: "queue.Queue[str]") -> Any:
        step = plan.get_nowait() if not plan.empty() else "ok"
        if step == "fail":
            raise RuntimeError("init refused")
        if step.startswith("block-then-fail"):
            q.put(("blocked", tag))
            gate: threading.Event = self.__class__.gates[tag]
            gate.wait(10)
            raise RuntimeError("init refused after blocking")
        return super().init(q, tag)

    gates: dict[str, threading.Event] = {}


class Ignorer(GenServer):
    def init(self, *args: Any) -> Any:
        return ignore
