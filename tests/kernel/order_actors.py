"""Actors of the order-across-kinds tests (importable by name in host processes)."""

from __future__ import annotations

import queue
from typing import Any

from actors import GenServer, noreply


class Burst(GenServer):
    """On ``(what, target, n)``: casts ``n`` messages to ``target``, then, in the
    same callback, one signal of another kind to the same process: an exit
    signal, a link, a monitor, or (``"reply"``) the answer to this very call."""

    def init(self) -> None:
        self.trap_exit = True  # a link to a target that dies later must not take the sender down

    def handle_call(self, request: Any, from_: Any) -> Any:
        what, target, n = request
        if what == "mixed":  # n: the casts, small and big, in the order to send them
            for body in n:
                target.cast(body)
            return "sent"
        for i in range(n):
            target.cast(("c", i))
        if what == "exit":
            self.exit(target, "after_casts")
        elif what == "link":
            self.link(target)
        elif what == "monitor":
            self.monitor(target)
        elif what == "reply":
            self.reply(from_, "after_casts")  # answered before the callback returns
            return noreply
        else:
            raise ValueError(what)
        return "sent"


class Receiver(GenServer):
    """Traps exits; puts every cast and info message it gets on a queue, in
    the order its callbacks see them."""

    def init(self, q: "queue.Queue[Any]") -> None:
        self.q = q
        self.trap_exit = True

    def handle_cast(self, request: Any) -> None:
        self.q.put(("cast", request))

    def handle_info(self, message: Any) -> None:
        self.q.put(message)
