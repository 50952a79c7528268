"""Helpers of the replicator's PostgreSQL tests: sources in the store, what targets hold."""

from __future__ import annotations

from actors.replicator.stores import open_db


def make_pg_sources(url: str, count: int, docs: int, prefix: str = "src") -> list[tuple[str, str, str]]:
    """``count`` source databases of ``docs`` documents each in the store; (doc id, source, target)."""
    out = []
    for i in range(count):
        source, target = f"{prefix}{i}", f"{prefix}{i}_copy"
        with open_db(source, store=url, create=True) as db:
            for d in range(docs):
                db.put(f"d{d:03d}", {"i": i, "d": d})
        out.append((f"rep{i}", source, target))
    return out


def latest_revs(url: str, name: str) -> dict[str, str]:
    """doc id -> current revision (deleted ones included), or {} if the database does not exist."""
    try:
        db = open_db(name, store=url)
    except Exception:
        return {}
    with db:
        return {c.id: c.rev for c in db.changes(0)}
