"""Actors the process-group and global-name tests start on every node
(importable by name on each), and a watcher that a test waits on."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from actors import ActorRef, Exit, GenServer, global_names, noreply, pg, send


class Member(GenServer):
    """Joins, leaves and registers itself as the test asks, from its own node."""

    def init(self, tag: str = "m") -> None:
        self.tag = tag
        self.seen: list[Any] = []

    def handle_info(self, message: Any) -> None:
        self.seen.append(message)

    def handle_call(self, request: Any, from_: Any) -> Any:
        op = request[0]
        if op == "join":
            pg.join(request[1], self.ref)
            return "ok"
        if op == "leave":
            return pg.leave(request[1], self.ref)
        if op == "members":
            return pg.members(request[1])
        if op == "local_members":
            return pg.local_members(request[1])
        if op == "register":
            return global_names.register(request[1], self.ref)
        if op == "whereis":
            return global_names.whereis(request[1])
        if op == "race":  # register under each name in turn, as fast as it can
            return [global_names.register(name, self.ref) for name in request[1]]
        if op == "seen":
            return list(self.seen)
        if op == "broadcast":
            return pg.broadcast(request[1], request[2])
        if op == "ping":
            return ("pong", self.tag)
        if op == "send_named":  # ("send_named", name, node, message): one way, by name on that node
            send((request[1], request[2]), request[3])
            return "sent"
        if op == "send_to":  # ("send_to", ref, message)
            request[1].send(request[2])
            return "sent"
        if op == "call_to":  # ("call_to", ref, request): the answer, or ("exit", reason)
            try:
                return request[1].call(request[2], timeout=10.0)
            except Exit as exc:
                return ("exit", exc.reason)
        return ("unknown", request)


class Spawner(GenServer):
    """Starts many members on its node at once and joins them (one call from the test)."""

    def handle_call(self, request: Any, from_: Any) -> Any:
        op, count, groups_of = request
        assert op == "spawn_members"
        refs = []
        for i in range(count):
            ref = self.spawn(Member, f"bulk{i}")
            for group in groups_of[i]:
                pg.join(group, ref)
            refs.append(ref)
        return refs


class ViewWatcher(GenServer):
    """Subscribes (``pg.monitor``) to some groups and keeps its node's view of
    them from the messages alone; ``("await", expected)`` is answered once the
    view equals ``expected`` (group -> refs, any order), so a test waits on
    messages, not on time.  Every event is kept for the history checks."""

    def init(self, groups: list[Any]) -> None:
        self.view: dict[Any, Counter[ActorRef]] = {}
        self.events: list[Any] = []
        for group in groups:
            self.view[group] = Counter(pg.monitor(group))
        self.waiting: list[tuple[dict[Any, Counter[ActorRef]], Any]] = []

    def _matches(self, expected: dict[Any, Counter[ActorRef]]) -> bool:
        return all(+self.view.get(g, Counter()) == want for g, want in expected.items())

    def handle_call(self, request: Any, from_: Any) -> Any:
        op = request[0]
        if op == "await":
            expected = {g: Counter(refs) for g, refs in request[1].items()}
            if self._matches(expected):
                return "ok"
            self.waiting.append((expected, from_))
            return noreply
        if op == "events":
            return list(self.events)
        if op == "view":
            return {g: sorted(c.elements(), key=repr) for g, c in self.view.items()}
        return None

    def handle_info(self, message: Any) -> None:
        kind, group, refs = message
        self.events.append(message)
        counts = self.view.setdefault(group, Counter())
        if kind == "join":
            counts.update(refs)
        else:
            counts.subtract(refs)
        still = []
        for expected, from_ in self.waiting:
            if self._matches(expected):
                self.reply(from_, "ok")
            else:
                still.append((expected, from_))
        self.waiting = still


class Inbox(GenServer):
    """Keeps every message it is sent; ``("await", expected)`` is answered once
    the messages so far are ``expected``, so a test waits on their arrival."""

    def init(self) -> None:
        self.got: list[Any] = []
        self.waiting: list[tuple[list[Any], Any]] = []

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request[0] == "await":
            if self.got == request[1]:
                return "ok"
            self.waiting.append((request[1], from_))
            return noreply
        return list(self.got)

    def handle_info(self, message: Any) -> None:
        self.got.append(message)
        for expected, from_ in [w for w in self.waiting if w[0] == self.got]:
            self.reply(from_, "ok")
        self.waiting = [w for w in self.waiting if w[0] != self.got]


@dataclass(frozen=True)
class Point:
    """A message that is not plain data: it travels pickled, naming its class."""

    x: int
    y: int
