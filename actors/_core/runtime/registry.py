"""The node-wide name registry (it lives in the node process)."""

from __future__ import annotations

import threading

from actors._core.wire.ref import ActorRef

__all__ = ["Registry"]


class Registry:
    """Names to refs, one name per actor at most as in Erlang's ``register/2``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[str, ActorRef] = {}

    def register(self, name: str, ref: ActorRef) -> ActorRef | None:
        """Take ``name`` for ``ref``; returns the current holder when it is taken."""
        with self._lock:
            holder = self._names.get(name)
            if holder is not None and holder != ref:
                return holder
            self._names[name] = ref
            return None

    def unregister(self, name: str, ref: ActorRef | None = None) -> bool:
        """Drop ``name`` (only if ``ref`` holds it, when given)."""
        with self._lock:
            holder = self._names.get(name)
            if holder is None or (ref is not None and holder != ref):
                return False
            del self._names[name]
            return True

    def whereis(self, name: str) -> ActorRef | None:
        with self._lock:
            return self._names.get(name)

    def drop_proc(self, proc: str) -> list[str]:
        """Forget every name held by an actor of a dead OS process."""
        with self._lock:
            gone = [n for n, r in self._names.items() if r.proc == proc]
            for name in gone:
                del self._names[name]
            return gone

    def snapshot(self) -> dict[str, ActorRef]:
        with self._lock:
            return dict(self._names)
