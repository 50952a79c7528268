"""The bookkeeping of one process-group scope, as plain data (no actors).

OTP's ``pg`` keeps, in each node's scope process, the groups of the local
processes and a copy of every peer scope's groups.  This module is that
state and its transitions; `actors.pg.Scope` only carries them out (sends,
monitors).  Every transition returns the changes a subscriber must hear,
``("join" | "leave", group, refs)``, in the order they happened.

Members are kept as lists, not sets: an actor that joins a group twice is
a member twice and leaves once per ``leave`` (as in OTP).  A peer is the
ref of another node's scope actor; its node id names the node's
incarnation, so the members of a restarted node's previous incarnation
are a different peer's and go when that peer is dropped.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

__all__ = ["Change", "PgState"]

#: ``("join" | "leave", group, [ref, ...])``: what a subscriber of ``group`` hears.
Change = tuple[str, Hashable, list[Any]]


def _remove_each(members: list[Any], refs: Iterable[Any]) -> list[Any]:
    """Remove one occurrence of each of ``refs`` from ``members`` (in place); the removed ones."""
    removed = []
    for ref in refs:
        try:
            members.remove(ref)
        except ValueError:
            continue
        removed.append(ref)
    return removed


class PgState:
    """Local groups, every peer's groups, and who watches which group."""

    def __init__(self) -> None:
        self.local: dict[Hashable, list[Any]] = {}
        self.remote: dict[Any, dict[Hashable, list[Any]]] = {}
        self.watchers: dict[Hashable, list[Any]] = {}

    # -- queries -----------------------------------------------------------------

    def members(self, group: Hashable) -> list[Any]:
        """Every member on every known node: this node's first, then each peer's."""
        found = list(self.local.get(group, ()))
        for groups in self.remote.values():
            found.extend(groups.get(group, ()))
        return found

    def local_members(self, group: Hashable) -> list[Any]:
        return list(self.local.get(group, ()))

    def which_groups(self) -> list[Hashable]:
        """Groups with at least one member anywhere."""
        seen = dict.fromkeys(self.local)
        for groups in self.remote.values():
            seen.update(dict.fromkeys(groups))
        return list(seen)

    def local_groups_of(self, ref: Any) -> list[Hashable]:
        """The groups ``ref`` (a local actor) is in, once per membership."""
        return [group for group, members in self.local.items() for member in members if member == ref]

    def is_local_member(self, ref: Any) -> bool:
        return any(ref in members for members in self.local.values())

    def snapshot(self) -> dict[Hashable, list[Any]]:
        """The local groups, as a peer is sent them in a sync."""
        return {group: list(members) for group, members in self.local.items()}

    # -- local members ---------------------------------------------------------------

    def join_local(self, group: Hashable, refs: list[Any]) -> list[Change]:
        if not refs:
            return []
        self.local.setdefault(group, []).extend(refs)
        return [("join", group, list(refs))]

    def leave_local(self, group: Hashable, refs: list[Any]) -> list[Change]:
        """One membership of each of ``refs`` ends; none of them a member: no change."""
        members = self.local.get(group)
        if not members:
            return []
        removed = _remove_each(members, refs)
        if not members:
            del self.local[group]
        return [("leave", group, removed)] if removed else []

    def local_died(self, ref: Any) -> list[Change]:
        """A local member is dead: it leaves every group, every membership at once."""
        changes: list[Change] = []
        for group in list(self.local):
            members = self.local[group]
            removed = [m for m in members if m == ref]
            if removed:
                members[:] = [m for m in members if m != ref]
                if not members:
                    del self.local[group]
                changes.append(("leave", group, removed))
        return changes

    # -- peers -------------------------------------------------------------------------

    def knows(self, peer: Any) -> bool:
        return peer in self.remote

    def add_peer(self, peer: Any) -> bool:
        """Start keeping ``peer``'s groups (none yet); False when already kept."""
        if peer in self.remote:
            return False
        self.remote[peer] = {}
        return True

    def sync_peer(self, peer: Any, groups: dict[Hashable, list[Any]]) -> list[Change]:
        """``peer`` sent all its local groups: they replace what was kept.

        The changes are the difference, so a subscriber hears only what is new
        (a sync that repeats what a peer's deltas said already is silent)."""
        old = self.remote.get(peer, {})
        new = {group: list(refs) for group, refs in groups.items() if refs}
        self.remote[peer] = new
        changes: list[Change] = []
        for group in dict.fromkeys([*old, *new]):
            before, after = list(old.get(group, ())), list(new.get(group, ()))
            gone = before[:]
            _remove_each(gone, after)  # in before, not after (with multiplicity)
            came = after[:]
            _remove_each(came, before)
            if came:
                changes.append(("join", group, came))
            if gone:
                changes.append(("leave", group, gone))
        return changes

    def remote_join(self, peer: Any, group: Hashable, refs: list[Any]) -> list[Change]:
        """A delta from ``peer``; ignored from a peer not known (its sync comes first)."""
        groups = self.remote.get(peer)
        if groups is None or not refs:
            return []
        groups.setdefault(group, []).extend(refs)
        return [("join", group, list(refs))]

    def remote_leave(self, peer: Any, group: Hashable, refs: list[Any]) -> list[Change]:
        groups = self.remote.get(peer)
        if groups is None or group not in groups:
            return []
        removed = _remove_each(groups[group], refs)
        if not groups[group]:
            del groups[group]
        return [("leave", group, removed)] if removed else []

    def drop_peer(self, peer: Any) -> list[Change]:
        """``peer`` is gone (its node went down, or its scope died): its members leave."""
        groups = self.remote.pop(peer, None) or {}
        return [("leave", group, list(refs)) for group, refs in groups.items() if refs]

    # -- subscribers ------------------------------------------------------------------

    def watch(self, group: Hashable, watcher: Any) -> bool:
        """True when ``watcher`` was not watching ``group`` before."""
        watching = self.watchers.setdefault(group, [])
        if watcher in watching:
            return False
        watching.append(watcher)
        return True

    def unwatch(self, group: Hashable, watcher: Any) -> bool:
        watching = self.watchers.get(group)
        if not watching or watcher not in watching:
            return False
        watching.remove(watcher)
        if not watching:
            del self.watchers[group]
        return True

    def watcher_died(self, watcher: Any) -> None:
        for group in list(self.watchers):
            self.unwatch(group, watcher)

    def is_watching(self, watcher: Any) -> bool:
        return any(watcher in watching for watching in self.watchers.values())

    def watchers_of(self, group: Hashable) -> list[Any]:
        return list(self.watchers.get(group, ()))
