"""A test actor whose thread the test holds, so that its mailbox fills, and
the gate that holds it: FIFOs, which work across processes and nodes of one
machine and synchronise on opens and reads, never on time."""

from __future__ import annotations

import os
import threading
from typing import Any

from actors import ActorRef, GenServer


class Held(GenServer):
    """Keeps what it is cast and sent.  ``["hold", gate, n, done]`` blocks
    its thread until the test closes the gate FIFO's write end, then writes
    to the done FIFO once it has kept ``n`` messages in all."""

    def init(self) -> None:
        self.seen: list[Any] = []
        self.expect: int | None = None
        self.done: str | None = None

    def handle_cast(self, request: Any) -> None:
        if type(request) is list and request and request[0] == "hold":
            with open(request[1]) as gate:  # returns once the test opened the write end
                gate.read()  # ... and this once it closed it
            self.expect, self.done = request[2], request[3]
            self._check()
            return
        self._keep(request)

    def handle_info(self, message: Any) -> None:
        self._keep(("info", message))

    def _keep(self, message: Any) -> None:
        self.seen.append(message)
        self._check()

    def _check(self) -> None:
        if self.done is not None and self.expect is not None and len(self.seen) >= self.expect:
            done, self.done = self.done, None
            with open(done, "w") as out:  # returns once the test opened the read end
                out.write("done")

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "seen":
            return list(self.seen)
        if request == "dropped":
            return self._actor_cell.info()["dropped"]
        return ("echo", request)


class Gate:
    """Hold a `Held` actor.  Entering returns once its thread is inside the
    hold, so its mailbox is empty and nothing sent to it from then on is
    taken out until `release`, which returns once it has kept ``expect``
    messages in all."""

    def __init__(self, ref: ActorRef, directory: Any, expect: int) -> None:
        self.ref = ref
        tag = f"{ref.id}-{threading.get_ident()}"
        self.path = os.path.join(str(directory), f"gate-{tag}")
        self.done = os.path.join(str(directory), f"done-{tag}")
        os.mkfifo(self.path)
        os.mkfifo(self.done)
        self.expect = expect
        self._write: Any = None

    def __enter__(self) -> "Gate":
        self.ref.cast(["hold", self.path, self.expect, self.done])
        self._write = open(self.path, "w")  # blocks until the actor opened its end
        return self

    def release(self) -> None:
        if self._write is not None:
            self._write.close()
            self._write = None
            with open(self.done) as done:
                assert done.read() == "done"

    def __exit__(self, *exc: Any) -> None:
        if self._write is not None:
            self._write.close()
            self._write = None
        os.unlink(self.path)
        os.unlink(self.done)
