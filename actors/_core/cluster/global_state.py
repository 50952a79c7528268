"""One node's copy of the cluster-wide name table, as plain data (no actors).

Every node's name server keeps a full copy: name -> holder ref.  A
registration takes a lock on the name in every known node's copy (one
node after another, in the order of their names, so the first node in that
order serialises concurrent registrants), reads each copy's holder, and only
when every copy says "free" writes the holder into every copy, each write
releasing that copy's lock.  A lock is a token ``(requester node id,
random)``; it is released by its owner, when its lease runs out, or when
the requester's node goes down.

When two copies disagree about a name (two groups of nodes that registered
it apart meet), `keeps` picks the holder that stays: the same answer on
every node, with no message exchanged.

A table is safe to share between threads: each method is atomic.  The
name server changes it from its actor, and the node's link merges a peer's
copy into it on the link's thread while the two nodes connect (before
either reports the other up), and answers ``whereis`` from the node's
I/O thread, never queued behind the server's work.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

__all__ = ["NameTable", "keeps", "node_name_of"]

Token = Hashable


def node_name_of(ref: Any) -> str:
    """The node name in a ref's node id (``"b@3f2a"`` -> ``"b"``)."""
    return ref.node_id.rpartition("@")[0] or ref.node_id


def _rank(ref: Any) -> tuple[str, str, str]:
    return (node_name_of(ref), ref.node_id, ref.id)


def keeps(a: Any, b: Any) -> Any:
    """Of two holders of one name, the one that keeps it: the holder on the
    node whose name sorts first (then node id, then actor id), so every node
    decides alike without asking the others."""
    return a if _rank(a) <= _rank(b) else b


class NameTable:
    """Names, their holders and the locks of registrations in progress."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = {}
        self.locks: dict[str, Token] = {}
        self._mutex = threading.RLock()

    # -- queries -----------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """A copy of every name and its holder."""
        with self._mutex:
            return dict(self.names)

    def locked(self, name: str) -> bool:
        with self._mutex:
            return name in self.locks

    def whereis(self, name: str) -> Any:
        with self._mutex:
            return self.names.get(name)

    def held_on(self, node_id: str) -> dict[str, Any]:
        """The names whose holders live on ``node_id`` (what a node tells a peer in a sync)."""
        with self._mutex:
            return {name: ref for name, ref in self.names.items() if ref.node_id == node_id}

    def holds_any(self, ref: Any) -> bool:
        with self._mutex:
            return any(holder == ref for holder in self.names.values())

    # -- the registration protocol -----------------------------------------------------

    def lock(self, name: str, token: Token) -> tuple[str, Any]:
        """``("ok", holder or None)`` with the lock now owned by ``token``, or
        ``("busy", None)`` while another registration holds it."""
        with self._mutex:
            owner = self.locks.get(name)
            if owner is not None and owner != token:
                return ("busy", None)
            self.locks[name] = token
            return ("ok", self.names.get(name))

    def unlock(self, name: str, token: Token) -> bool:
        with self._mutex:
            if self.locks.get(name) != token:
                return False
            del self.locks[name]
            return True

    def commit(self, name: str, ref: Any, token: Token) -> bool:
        """Write ``name -> ref`` and release the lock; refused (False) when the
        lock is no longer ``token``'s (its lease ran out)."""
        with self._mutex:
            if self.locks.get(name) != token:
                return False
            del self.locks[name]
            self.names[name] = ref
            return True

    def commit_drop(self, name: str, ref: Any, token: Token) -> bool:
        """Unregister ``name`` (only while ``ref`` holds it) and release the lock."""
        with self._mutex:
            if self.locks.get(name) != token:
                return False
            del self.locks[name]
            if self.names.get(name) == ref:
                del self.names[name]
            return True

    def release_locks_of(self, node_id: str) -> list[str]:
        """The requester's node went down: its registrations will never finish."""
        with self._mutex:
            gone = [
                name for name, token in self.locks.items() if isinstance(token, tuple) and token and token[0] == node_id
            ]
            for name in gone:
                del self.locks[name]
            return gone

    # -- holders going away -------------------------------------------------------------

    def holder_gone(self, ref: Any) -> list[str]:
        """``ref`` died (or its node went down): its names are free."""
        with self._mutex:
            gone = [name for name, holder in self.names.items() if holder == ref]
            for name in gone:
                del self.names[name]
            return gone

    # -- peers meeting ---------------------------------------------------------------------

    def merge(self, names: dict[str, Any]) -> tuple[list[str], list[tuple[str, Any, Any]]]:
        """A peer's names (those held on its node).  Returns the names taken
        over as they are, and the conflicts ``(name, kept, ended)`` where this
        copy had another holder; the table then holds the kept one."""
        with self._mutex:
            adopted: list[str] = []
            conflicts: list[tuple[str, Any, Any]] = []
            for name, ref in names.items():
                mine = self.names.get(name)
                if mine is None:
                    self.names[name] = ref
                    adopted.append(name)
                elif mine != ref:
                    kept = keeps(mine, ref)
                    ended = ref if kept is mine else mine
                    self.names[name] = kept
                    conflicts.append((name, kept, ended))
            return adopted, conflicts
