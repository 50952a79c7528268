"""Render a node's actors as a supervision tree (pure: snapshots in, lines out)."""

from __future__ import annotations

from typing import Any

__all__ = ["render_tree"]


def _label(entry: dict[str, Any]) -> str:
    name = entry.get("registered") or entry.get("name")
    head = f"{name} ({entry['id']})" if name else entry["id"]
    where = f"pid {entry.get('pid')}"
    if entry.get("cpus"):
        where += f" cpus {','.join(map(str, entry['cpus']))}"
    mbox = f"mbox {entry.get('mailbox', 0)}"
    if entry.get("mailbox_limit"):
        # A bounded mailbox: its bound, policy and what the policy dropped.
        mbox += f"/{entry['mailbox_limit']} {entry.get('overflow')} dropped {entry.get('dropped', 0)}"
    parts = [head, entry.get("class", "?"), where, mbox]
    status = entry.get("status") or {}
    if isinstance(status, dict):
        for key, value in status.items():
            if isinstance(value, (int, float, str)):
                parts.append(f"{key} {value}")
    return "  ".join(parts)


def render_tree(actors: list[dict[str, Any]], limit: int = 200) -> list[str]:
    """Actors under their parents (their supervisors), roots first, in id order.

    Drawn as ``tree`` draws folders: ``├─`` for a child with siblings after
    it, ``└─`` for the last one, and ``│`` continuing a parent's line.
    """
    by_id = {a["id"]: a for a in actors}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for entry in actors:
        parent = entry.get("parent")
        key = parent if parent in by_id else None
        children.setdefault(key, []).append(entry)
    for group in children.values():
        group.sort(key=lambda e: _id_key(e["id"]))
    lines: list[str] = []

    def walk(key: str | None, prefix: str, root: bool) -> None:
        group = children.get(key, [])
        for index, entry in enumerate(group):
            if len(lines) >= limit:
                return
            last = index == len(group) - 1
            if root:
                lines.append(_label(entry))
                walk(entry["id"], "", False)
            else:
                lines.append(prefix + ("└─ " if last else "├─ ") + _label(entry))
                walk(entry["id"], prefix + ("   " if last else "│  "), False)

    walk(None, "", True)
    if len(actors) > len(lines):
        lines.append(f"... {len(actors) - len(lines)} more actors")
    return lines


def _id_key(actor_id: str) -> tuple[str, int]:
    proc, _, num = actor_id.partition(".")
    return (proc, int(num) if num.isdigit() else 0)
