"""A PostgreSQL handle for leases and small fenced writes, every operation bounded in time.

One connection per handle, behind a lock; autocommit outside `transaction`.
What makes a holder safe is that nothing here can hang: the connect
timeout, ``statement_timeout``, ``tcp_user_timeout`` and TCP keepalives are
all set from ``op_timeout``, and the server ends a session left idle inside
a transaction (its client frozen or cut off while holding a lease row's
lock) after ``min(op_timeout, 5 s)``, so another node can take the lease.
A failed connection raises `StoreUnavailable` (the URL without its
password) and is dropped; the next operation connects again.

The replicator's document store sets its connections up the same way (its
``docstore_pg``); this handle exists so that a service needing only leases
(sharding) need not open a document store.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

try:  # optional: pip install 'otpy-actors[postgres]'
    import psycopg
    import psycopg.conninfo
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]

from .errors import StoreUnavailable
from .sql import LEASE_SCHEMA

__all__ = ["IDLE_IN_TRANSACTION", "PgStore", "PgTx", "bounded_params", "connect_ready", "is_postgres", "redact"]

#: Seconds at most a session may sit idle inside a transaction (its client stalled).
IDLE_IN_TRANSACTION = 5.0
#: Advisory lock key under which the schema is created (nodes starting together agree).
_SCHEMA_LOCK = 0x6C6561736573  # "leases"
_schema_ready: set[tuple[str, tuple[str, ...]]] = set()
_schema_lock = threading.Lock()


def is_postgres(url: Any) -> bool:
    """``url`` is a PostgreSQL URL."""
    return isinstance(url, str) and url.startswith(("postgresql://", "postgres://"))


def redact(url: str) -> str:
    """``url`` without its password (safe for logs and error messages)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.rsplit("@", 1)[1]
        user = parts.username or ""
    except ValueError:
        return url.split("@", 1)[-1] if "@" in url else url
    return urlunsplit((parts.scheme, f"{user}:***@{netloc}", parts.path, parts.query, parts.fragment))


def bounded_params(url: str, connect_timeout: int, op_timeout: float) -> dict[str, Any]:
    """psycopg connection parameters for ``url`` under which no operation hangs:
    connect and statement timeouts, the server ending a session idle inside a
    transaction, and on TCP keepalives and ``tcp_user_timeout``.  Added to the
    URL's own options (a search_path, say), not instead of them."""
    params: dict[str, Any] = dict(psycopg.conninfo.conninfo_to_dict(url))
    params["connect_timeout"] = connect_timeout
    idle = int(min(op_timeout, IDLE_IN_TRANSACTION) * 1000)
    timeout = f"-c statement_timeout={int(op_timeout * 1000)} -c idle_in_transaction_session_timeout={max(1, idle)}"
    params["options"] = f"{params['options']} {timeout}" if params.get("options") else timeout
    host = str(params.get("host") or "")
    if host and not host.startswith("/"):  # TCP, not a unix socket directory
        params.update(
            keepalives=1,
            keepalives_idle=1,
            keepalives_interval=1,
            keepalives_count=3,
            tcp_user_timeout=int(op_timeout * 1000),
        )
    return params


def connect_ready(params: dict[str, Any], ready: Callable[[Any], None]) -> Any:
    """An autocommit connection with ``params``, handed to ``ready`` (a
    schema check) before it is returned, and closed if that fails: a store
    never keeps a connection it could not make ready."""
    conn = psycopg.connect(psycopg.conninfo.make_conninfo("", **params), autocommit=True)
    try:
        ready(conn)
    except BaseException:
        conn.close()
        raise
    return conn


class PgTx:
    """One open transaction, in `actors.leases.sql.LeaseTx`'s shape."""

    row_lock = " FOR UPDATE"
    share_lock = " FOR SHARE"

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def run(self, sql: str, params: Any = ()) -> Any:
        return self.connection.execute(sql.replace("?", "%s"), params)

    def now(self) -> float:
        return float(self.connection.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()[0])


class PgStore:
    """The leases' tables (and ``schema``'s, created with them) in the database at ``url``."""

    def __init__(
        self, url: str, *, op_timeout: float, connect_timeout: float | None = None, schema: Iterable[str] = ()
    ) -> None:
        if psycopg is None:
            raise StoreUnavailable("a PostgreSQL store needs psycopg: pip install 'psycopg[binary]'")
        if not is_postgres(url):
            raise ValueError(f"{redact(str(url))!r} is not a postgresql:// URL")
        if not (isinstance(op_timeout, (int, float)) and math.isfinite(op_timeout) and op_timeout > 0):
            raise ValueError(f"op_timeout must be a number of seconds > 0, got {op_timeout!r}")
        self.url = url
        self.op_timeout = float(op_timeout)
        self.connect_timeout = max(1, math.ceil(connect_timeout if connect_timeout is not None else op_timeout))
        self.schema = tuple(s.format(serial="BIGSERIAL PRIMARY KEY") for s in (*LEASE_SCHEMA, *schema))
        self._lock = threading.Lock()
        self._conn: Any = None
        self._closed = False

    @property
    def store_id(self) -> str:
        return self.url

    def _connect(self) -> Any:
        return connect_ready(bounded_params(self.url, self.connect_timeout, self.op_timeout), self._ensure_schema)

    def _ensure_schema(self, conn: Any) -> None:
        key = (self.url, self.schema)
        with _schema_lock:
            if key in _schema_ready:
                return
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for statement in self.schema:
                    conn.execute(statement)
            _schema_ready.add(key)

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PgTx]:
        """A transaction; `StoreUnavailable` when the server cannot be reached in time."""
        with self._lock:
            if self._closed:
                raise StoreUnavailable(f"{redact(self.url)}: closed")
            try:
                if self._conn is None:
                    self._conn = self._connect()
                with self._conn.transaction():
                    yield PgTx(self._conn)
            except psycopg.Error as exc:
                if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)) or self._broken(exc):
                    self._drop()
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    raise StoreUnavailable(f"{redact(self.url)}: {first}") from exc
                raise

    def _broken(self, exc: Any) -> bool:
        state = getattr(exc, "sqlstate", None) or ""
        conn = self._conn
        return (
            (conn is not None and (conn.closed or getattr(conn, "broken", False)))
            or state.startswith(("08", "57"))
            or state == "25P03"
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._drop()
