"""The document store on PostgreSQL: the databases of every node, on every machine.

A PostgreSQL database (the store URL, ``[replicator] store``) holds many
replicator databases -- ``_replicator`` and the sources and targets that
replications name -- in the tables of `docstore_sql`, with a ``db`` column,
and the leases and the audit of runs (`lease_sql`).  psycopg 3, one
connection per handle, autocommit outside explicit transactions; row locks
(``FOR UPDATE`` on a database's sequence row, ``FOR SHARE`` on a lease a
write is fenced by) do what SQLite's whole-file writer lock does.

The store's clock is PostgreSQL's (``clock_timestamp()``): lease expiries
are compared on one clock, whatever the nodes' clocks say.  A connection that
fails raises `StoreUnavailable` (naming the URL without its password) and is
dropped; the next call connects again, so a handle outlives a restart of the
server.  ``op_timeout`` bounds every statement (``statement_timeout``, and
``tcp_user_timeout`` on TCP), so a caller cut off from the server gets an
error in bounded time rather than hanging; and a session left idle inside a
transaction (its client frozen or cut off while it held row locks) is ended
by the server after ``min(op_timeout, 5 s)``
(``idle_in_transaction_session_timeout``), so its locks never stop another
node from taking a lease over.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
from collections.abc import Iterator
from typing import Any

try:  # optional: pip install 'otpy-actors[postgres]'
    import psycopg
    import psycopg.conninfo
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]

from actors.leases.pg import bounded_params, connect_ready, redact

from .docs_model import DocStoreError, StoreUnavailable
from .docstore_sql import SCHEMA, SQLDocStore

__all__ = ["DB_NAME_RE", "PgDocStore", "redact"]

#: CouchDB's rule for database names (``_replicator`` and the other system names included).
DB_NAME_RE = re.compile(r"^_?[a-z][a-z0-9_$()+/-]*$")
#: Advisory lock key under which the schema is created (nodes starting together agree).
_SCHEMA_LOCK = 0x7265706C6462  # "repldb"
_schema_ready: set[str] = set()
#: Seconds at most a session may sit idle inside a transaction (its client stalled).
IDLE_IN_TRANSACTION = 5.0
_schema_lock = threading.Lock()


class PgDocStore(SQLDocStore):
    """One database (``name``) of the PostgreSQL document store at ``url``."""

    param = "%s"
    row_lock = " FOR UPDATE"
    share_lock = " FOR SHARE"

    def __init__(
        self,
        url: str,
        name: str,
        *,
        create: bool = False,
        connect_timeout: float = 5.0,
        op_timeout: float | None = 10.0,
    ) -> None:
        if psycopg is None:
            raise StoreUnavailable("the PostgreSQL store needs psycopg: pip install 'psycopg[binary]'")
        if not isinstance(name, str) or not DB_NAME_RE.match(name):
            raise ValueError(f"bad database name {name!r}: lowercase letter first, then a-z 0-9 _$()+-/")
        self.url = url
        self.connect_timeout = max(1, math.ceil(connect_timeout))
        self.op_timeout = op_timeout
        super().__init__(f"{redact(url)}#{name}", name, name, create=create)

    @property
    def store_id(self) -> str:
        return self.url

    def _connect(self) -> Any:
        if self.op_timeout is not None:
            params = bounded_params(self.url, self.connect_timeout, self.op_timeout)
        else:
            params = dict(psycopg.conninfo.conninfo_to_dict(self.url), connect_timeout=self.connect_timeout)
        return connect_ready(params, self._ensure_schema)

    def _ensure_schema(self, conn: Any) -> None:
        with _schema_lock:
            if self.url in _schema_ready:
                return
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for statement in SCHEMA:
                    conn.execute(statement.format(blob="BYTEA", serial="BIGSERIAL PRIMARY KEY"))
            _schema_ready.add(self.url)

    @contextlib.contextmanager
    def _begin(self, connection: Any) -> Iterator[None]:
        with connection.transaction():
            yield

    def _now(self, connection: Any) -> float:
        return float(connection.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()[0])

    def _translate(self, exc: BaseException) -> DocStoreError | None:
        if psycopg is None or not isinstance(exc, psycopg.Error):
            return None
        state = getattr(exc, "sqlstate", None) or ""
        conn = self._conn
        broken = conn is not None and (conn.closed or getattr(conn, "broken", False))
        # Unreachable: a failed connection, or one the server ended (operator intervention,
        # an idle-in-transaction timeout): the handle reconnects on its next call.
        if (
            isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
            or broken
            or state.startswith(("08", "57"))
            or state == "25P03"
        ):
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return StoreUnavailable(f"{self.path}: {first}")
        return DocStoreError(f"{self.path}: {exc}")
