"""Entity state in the store, written under the shard's fencing token.

One row per (type, key): the value (JSON), the token that wrote it, and
when.  `save` runs in one transaction with `actors.leases.sql.check_fence`
on the shard's lease (share-locked to the commit), so a holder whose lease
moved on -- cut off, frozen, superseded -- has its write refused
(`actors.leases.Fenced`) and the new holder's state stands.
"""

from __future__ import annotations

import json
from typing import Any

from actors.leases import Fence, PgStore
from actors.leases import sql as lease_sql

__all__ = ["STATE_SCHEMA", "StateStore"]

STATE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS sharding_state (type TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,"
    " token BIGINT NOT NULL, PRIMARY KEY (type, key))",
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

    def close(self) -> None:
        self.store.close()
