"""Entity state and remembered entities in the store, written under the shard's fencing token.

One row per (type, key): the value (JSON), the token that wrote it, and
when.  One row per remembered entity (type, shard, key as JSON, so an int
key comes back an int): the entities a shard's next holder starts again.  `save` runs in one transaction with `actors.leases.sql.check_fence`
on the shard's lease (share-locked to the commit), so a holder whose lease
moved on -- cut off, frozen, superseded -- has its write refused
(`actors.leases.Fenced`) and the new holder's state stands.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from actors.leases import Fence, PgStore
from actors.leases import sql as lease_sql

__all__ = ["STATE_SCHEMA", "StateStore"]

STATE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS sharding_state (type TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,"
    " token BIGINT NOT NULL, PRIMARY KEY (type, key))",
    "CREATE TABLE IF NOT EXISTS sharding_remembered (type TEXT NOT NULL, shard INTEGER NOT NULL, key TEXT NOT NULL,"
    " PRIMARY KEY (type, shard, key))",
)


class StateStore:
    """Entity values of every type in the store at ``url``; its own connection, so a
    slow write never delays the leases' renewals."""

    def __init__(self, url: str, op_timeout: float) -> None:
        self.store = PgStore(url, op_timeout=op_timeout, schema=STATE_SCHEMA)

    def load(self, type_name: str, key: str) -> Any:
        with self.store.transaction() as tx:
            row = tx.run("SELECT value FROM sharding_state WHERE type = ? AND key = ?", (type_name, key)).fetchone()
        return None if row is None else json.loads(row[0])

    def save(self, type_name: str, key: str, value: Any, fence: Fence) -> None:
        """Write ``value`` unless ``fence`` no longer holds the shard (`Fenced`)."""
        text = json.dumps(value)
        with self.store.transaction() as tx:
            lease_sql.check_fence(tx, fence)
            tx.run(
                "INSERT INTO sharding_state (type, key, value, token) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (type, key) DO UPDATE SET value = EXCLUDED.value, token = EXCLUDED.token",
                (type_name, key, text, fence.token),
            )

    def remembered(self, type_name: str, shard: int) -> list[Any]:
        """The keys remembered for ``shard``: the entities its holder starts on taking it."""
        with self.store.transaction() as tx:
            rows = tx.run(
                "SELECT key FROM sharding_remembered WHERE type = ? AND shard = ?", (type_name, shard)
            ).fetchall()
        return [json.loads(row[0]) for row in rows]

    def remember(self, type_name: str, shard: int, changes: Mapping[Any, bool], fence: Fence) -> None:
        """Add (True) or remove (False) keys of ``shard``'s remembered set, unless ``fence``
        no longer holds the shard (`Fenced`): a stale holder never edits the new one's set."""
        with self.store.transaction() as tx:
            lease_sql.check_fence(tx, fence)
            for key, add in changes.items():
                params = (type_name, shard, json.dumps(key))
                if add:
                    tx.run(
                        "INSERT INTO sharding_remembered (type, shard, key) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                        params,
                    )
                else:
                    tx.run("DELETE FROM sharding_remembered WHERE type = ? AND shard = ? AND key = ?", params)

    def close(self) -> None:
        self.store.close()
