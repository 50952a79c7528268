"""The actors `_groups.py` starts on every node (importable by name on each,
since every node of that bench runs from bench/)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from actors import ActorRef, GenServer, noreply, pg


class Member(GenServer):
    """An actor to join, register and call: ``("ping",)`` answers ``("pong", tag)``."""

    def init(self, tag: str = "m") -> None:
        self.tag = tag

    def handle_info(self, message: Any) -> None:
        pass  # nothing is sent to it on purpose; anything that is has no bearing on the figures

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request[0] == "ping":
            return ("pong", self.tag)
        return ("unknown", request)


class Spawner(GenServer):
    """Starts many members on its node at once and joins them (one call from the bench)."""

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
    view equals ``expected`` (group -> refs, any order), so the bench waits on
    messages, not on time."""

    def init(self, groups: list[Any]) -> None:
        self.view: dict[Any, Counter[ActorRef]] = {}
        for group in groups:
            self.view[group] = Counter(pg.monitor(group))
        self.waiting: list[tuple[dict[Any, Counter[ActorRef]], Any]] = []

    def _matches(self, expected: dict[Any, Counter[ActorRef]]) -> bool:
        return all(+self.view.get(g, Counter()) == want for g, want in expected.items())

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request[0] == "await":
            expected = {g: Counter(refs) for g, refs in request[1].items()}
            if self._matches(expected):
                return "ok"
            self.waiting.append((expected, from_))
            return noreply
        return None

    def handle_info(self, message: Any) -> None:
        kind, group, refs = message
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
