"""The PostgreSQL job store: one database shared by nodes on many machines.

The seed keeps jobs in FoundationDB so that every node of a cluster sees one
transactional store.  This is the store a deployment across machines uses
(SQLite stays the embedded default).  psycopg 3 with a `psycopg_pool`
connection pool, no ORM; the same `Store`/`StoreTx` protocols and the same
queries (`store_sql`) as SQLite, so everything above works unchanged.  What
is PostgreSQL's own is here: the pool, row locks and SKIP LOCKED claims,
the activity SEQUENCE and per-backend counters, NOTIFY, and mapping
connection errors to `StoreUnavailable`; the LISTEN side is `pg_listener`,
the schema and its migrations `pg_schema`.

How the seed's guarantees are kept without FoundationDB:

- **No job handed to two workers.**  ``accept`` claims a pending row with
  ``SELECT ... FOR UPDATE SKIP LOCKED`` (joined with the job row, so a job a
  concurrent ``resubmit``/``remove`` holds is skipped, never waited for), and
  every read of a job inside a writing transaction is ``FOR UPDATE``, so two
  writers of one job are serialised on its row under READ COMMITTED.
- **Activity without a hot row.**  A job's activity sequence comes from the
  ``couch_jobs_activity_seq`` SEQUENCE (``nextval`` is non-transactional
  and never waits), so it is unique but need not commit in order; the
  activity monitor only asks whether a running job still carries the
  sequence it saw one timeout ago (see `activity`).  The type's activity
  value -- what the type monitors compare to see that something happened --
  is the sum of per-connection counters, one row per (type, backend pid):
  every bump adds one to its own backend's row, which no concurrent
  transaction touches, so commits of one type never wait for each other's
  fsync, and the sum a later read sees is larger after any commit.
- **Wake-ups across machines.**  A transaction that changes jobs of a type
  runs ``pg_notify('couch_jobs', type)``; PostgreSQL delivers it at commit,
  to every ``LISTEN``-ing connection on any machine.  One listener thread per
  process (`pg_listener`) turns them into calls of the store's change
  listeners.  No polling.
- **No lock held for ever.**  The server ends a pooled session left idle
  inside a transaction for ``idle_in_transaction_timeout`` seconds
  (``idle_in_transaction_session_timeout``; 5 s by default, as the
  replicator's store, and FoundationDB's own limit on a transaction's life
  in the seed), so a client frozen or cut off while it held a job's row lock
  cannot stop the activity monitor, a resubmit or a remove of that job.
- **The caller's transaction.**  ``tx`` may be a psycopg connection the
  caller has in a transaction (its own tables and a job commit together), or
  what `PostgresStore.transaction` yields.

The schema is created on first start and versioned (`pg_schema`); a
database newer than this code is refused.  Connection failures raise
`StoreUnavailable` naming the store by its URL without the password.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

try:  # the PostgreSQL store is optional: pip install 'otpy-actors[postgres]'
    import psycopg
    import psycopg_pool
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]
    psycopg_pool = None  # type: ignore[assignment]

from .errors import StoreUnavailable
from .pg_listener import NOTIFY_CHANNEL, PgListener
from .pg_schema import SCHEMA_VERSION, check_version, migrate
from .store import CommitListener
from .store_sql import SQLStore, SQLTransaction

__all__ = [
    "IDLE_IN_TRANSACTION_TIMEOUT",
    "NOTIFY_CHANNEL",
    "SCHEMA_VERSION",
    "PostgresStore",
    "PostgresTransaction",
    "redact",
]

_log = logging.getLogger(__name__)

#: Seconds a pooled session may sit idle inside a transaction before the
#: server ends it (and its row locks with it); None leaves the server's setting.
IDLE_IN_TRANSACTION_TIMEOUT = 5.0

#: ``scheme://user:PASSWORD@`` where `urlsplit` refuses the URL (a bad port, an
#: unclosed ``[``): greedy up to the last ``@``, so no part of a password stays.
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/@:]*):(.*)@")


def _password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:  # malformed: still find the password to hide
        match = _USERINFO.match(url)
        return match.group(2) if match else None


def redact(url: str) -> str:
    """``url`` without its password (safe for logs and error messages), malformed ones too."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
    except ValueError:
        match = _USERINFO.match(url)
        return f"{match.group(1)}:***@{url[match.end() :]}" if match else url
    user = parts.username or ""
    netloc = f"{user}:***@{host}" if user else f":***@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class PostgresTransaction(SQLTransaction):
    """One open PostgreSQL transaction; also what host code uses for its own tables."""

    param = "%s"  # SQLite's is "?"
    row_lock = " FOR UPDATE"  # two writers of one job queue on its row (READ COMMITTED)
    claim_limit = 1  # SKIP LOCKED: each worker claims the first row nobody holds

    def execute(self, sql: str, params: Any = None) -> psycopg.Cursor:
        return self.connection.execute(sql, params)

    def touch(self, type_key: str) -> None:
        if type_key not in self._touched:
            # Delivered by PostgreSQL at commit, to every listener on every machine.
            self.connection.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, type_key))
        super().touch(type_key)

    def pending_range(
        self, type_key: str, min_sched_time: int, max_sched_time: int, limit: int
    ) -> list[tuple[int, str]]:
        if not self.write:
            return super().pending_range(type_key, min_sched_time, max_sched_time, limit)
        # Claim: lock the pending row and its job, skipping rows that another
        # accept (or a resubmit/remove of that job) holds -- never wait, never
        # hand one job to two workers.
        rows = self.connection.execute(
            "SELECT p.sched_time, p.id FROM couch_jobs_pending p "
            "JOIN couch_jobs j ON j.type = p.type AND j.id = p.id "
            "WHERE p.type = %s AND p.sched_time BETWEEN %s AND %s "
            "ORDER BY p.sched_time, p.id LIMIT %s FOR UPDATE SKIP LOCKED",
            (type_key, min_sched_time, max_sched_time, limit),
        ).fetchall()
        return [(int(s), i) for s, i in rows]

    # -- activity: a SEQUENCE, and one counter per (type, backend) ------------

    def bump_type_activity(self, type_key: str) -> int:
        # One round trip: count the activity on this backend's own row (no
        # other open transaction can hold it: one backend, one transaction)
        # and draw the job's sequence, which never waits.
        (value,) = self.connection.execute(
            "INSERT INTO couch_jobs_type_activity (type, shard, seq) "
            "VALUES (%s, pg_backend_pid(), 1) "
            "ON CONFLICT (type, shard) DO UPDATE SET seq = couch_jobs_type_activity.seq + 1 "
            "RETURNING nextval('couch_jobs_activity_seq')",
            (type_key,),
        ).fetchone()
        return int(value)

    def set_type_activity(self, type_key: str, seq: int) -> None:
        self.connection.execute("DELETE FROM couch_jobs_type_activity WHERE type = %s", (type_key,))
        self.connection.execute(
            "INSERT INTO couch_jobs_type_activity (type, shard, seq) VALUES (%s, 0, %s)",
            (type_key, seq),
        )

    def _seconds(self, stored: float) -> float:
        """Whole timeouts come back as ints, as SQLite returns what was stored."""
        return int(stored) if float(stored).is_integer() else float(stored)


class PostgresStore(SQLStore):
    """couch_jobs's tables in one PostgreSQL database, through a connection pool.

    ``url`` is a libpq URL (``postgresql://user:password@host:5432/db``, or
    ``?host=/socket/dir``).  Opening connects (at most ``connect_timeout``
    seconds), creates or migrates the schema, and fails with one
    `StoreUnavailable` line naming the store if it cannot.  ``pool_size``
    bounds this process's connections.  The pool is per process: an
    instance inherited across ``fork`` opens its own.
    """

    #: What LISTENs for this store's change listeners (`pg_listener`).
    listener_class: type[PgListener] = PgListener

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 8,
        connect_timeout: float = 5.0,
        read_only: bool = False,
        idle_in_transaction_timeout: float | None = IDLE_IN_TRANSACTION_TIMEOUT,
    ) -> None:
        if psycopg is None or psycopg_pool is None:
            raise StoreUnavailable(
                f"couch_jobs store {redact(url)!r} needs psycopg 3 and psycopg_pool: "
                "pip install 'otpy-actors[postgres]' (psycopg[binary], psycopg_pool)"
            )
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size!r}")
        if not connect_timeout > 0:
            raise ValueError(f"connect_timeout must be positive seconds, got {connect_timeout!r}")
        if idle_in_transaction_timeout is not None and not idle_in_transaction_timeout > 0:
            raise ValueError(
                f"idle_in_transaction_timeout must be None or positive seconds, got {idle_in_transaction_timeout!r}"
            )
        super().__init__(redact(url), read_only)
        self.url = url
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self.idle_in_transaction_timeout = idle_in_transaction_timeout
        self._pool: psycopg_pool.ConnectionPool | None = None
        self._pool_pid: int | None = None
        self._changes = self.listener_class(
            url, connect_kwargs=self._connect_kwargs, location=self.location, scrub=self._scrub
        )
        try:
            self._url_params = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise StoreUnavailable(
                f"couch_jobs store {self.location!r} is not a valid PostgreSQL URL: {self._scrub(str(exc))}"
            ) from None
        if read_only:
            self._check_schema()
        else:
            self._migrate()

    # -- errors ------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        password = _password(self.url) if "://" in self.url else None
        first = text.strip().splitlines()[0] if text.strip() else text
        return first.replace(password, "***") if password else first

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        return StoreUnavailable(f"couch_jobs store {self.location!r} is unavailable: {self._scrub(str(exc))}")

    # -- connections -------------------------------------------------------

    def _connect_kwargs(self) -> dict[str, Any]:
        """What every connection of this store adds to the URL's parameters.

        The session settings go after the URL's own ``options`` (a
        ``search_path``, say) or, when it has none, ``PGOPTIONS``, which an
        ``options`` parameter would otherwise replace.
        """
        kwargs: dict[str, Any] = {"connect_timeout": max(1, int(self.connect_timeout))}
        if self.idle_in_transaction_timeout is not None:
            # A client frozen (SIGSTOP) or cut off inside a transaction must not
            # hold its row locks for ever: the server ends the session instead.
            msec = max(1, int(self.idle_in_transaction_timeout * 1000))
            setting = f"-c idle_in_transaction_session_timeout={msec}"
            own = self._url_params.get("options") or os.environ.get("PGOPTIONS")
            kwargs["options"] = f"{own} {setting}" if own else setting
        return kwargs

    def _get_pool(self) -> psycopg_pool.ConnectionPool:
        if self._closed:
            raise self._closed_error()
        pid = os.getpid()
        pool = self._pool
        if pool is not None and self._pool_pid == pid:
            return pool
        with self._lock:
            if self._closed:
                raise self._closed_error()
            if self._pool is None or self._pool_pid != pid:
                self._pool = psycopg_pool.ConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=self.pool_size,
                    open=False,
                    timeout=self.connect_timeout,
                    reconnect_timeout=24 * 3600.0,
                    # One round trip per checkout: a connection the server
                    # dropped (restart, failover) is replaced, not handed out.
                    check=psycopg_pool.ConnectionPool.check_connection,
                    kwargs=self._connect_kwargs(),
                    name="couch_jobs",
                )
                self._pool.open(wait=False)
                self._pool_pid = pid
            return self._pool

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        pool = self._get_pool()
        conn: psycopg.Connection | None = None
        try:
            with pool.connection() as conn:
                yield conn
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
            raise self._unavailable(exc) from None
        except psycopg_pool.PoolClosed:
            raise self._closed_error() from None
        except psycopg.Error as exc:
            # The server ended the session (idle in a transaction too long, an
            # operator's pg_terminate_backend): the pool drops the connection.
            if conn is not None and (conn.closed or conn.broken):
                raise self._unavailable(exc) from None
            raise

    def _migrate(self) -> None:
        try:
            with psycopg.connect(self.url, connect_timeout=max(1, int(self.connect_timeout)), autocommit=False) as conn:
                migrate(conn, self.location)
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from None

    def _check_schema(self) -> None:
        """A read-only store migrates nothing: it needs a schema this code can read."""
        try:
            with psycopg.connect(self.url, connect_timeout=max(1, int(self.connect_timeout))) as conn:
                row = conn.execute("SELECT max(version) FROM couch_jobs_schema").fetchone()
        except psycopg.errors.UndefinedTable:
            raise StoreUnavailable(f"couch_jobs store {self.location!r} has no couch_jobs schema yet") from None
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from None
        check_version(row, self.location)

    def schema_version(self) -> int:
        with self._connection() as conn:
            row = conn.execute("SELECT max(version) FROM couch_jobs_schema").fetchone()
            conn.rollback()
        return int(row[0])

    # -- transactions ------------------------------------------------------

    def adopt(self, tx: Any) -> contextlib.AbstractContextManager[PostgresTransaction] | None:
        """A caller's psycopg connection as the scope of one couch_jobs call; else None.

        A connection in a transaction (or about to start one implicitly) is
        used as it is: the call commits or rolls back with the caller's own
        writes.  An autocommit connection outside any transaction block
        would commit each statement of the call on its own, releasing its
        row locks in between; the call then runs in a transaction block of
        its own on that connection (``conn.transaction()``)."""
        if psycopg is None or not isinstance(tx, psycopg.Connection):
            return None
        if tx.autocommit and tx.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            return self._adopt_in_block(tx)
        return contextlib.nullcontext(PostgresTransaction(self, tx, True))

    @contextlib.contextmanager
    def _adopt_in_block(self, conn: psycopg.Connection) -> Iterator[PostgresTransaction]:
        try:
            with conn.transaction():
                yield PostgresTransaction(self, conn, True)
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from None

    @contextlib.contextmanager
    def _begin(self, write: bool) -> Iterator[PostgresTransaction]:
        """A pooled connection in a transaction (READ COMMITTED; writers lock the rows they change).

        Commit listeners in every process also hear of the commit, through NOTIFY.
        """
        with self._connection() as conn:
            tx = PostgresTransaction(self, conn, write)
            with conn.transaction():
                if self.read_only:
                    # The server then refuses any write this transaction attempts.
                    conn.execute("SET TRANSACTION READ ONLY")
                yield tx

    # -- listeners on every machine ----------------------------------------

    def add_change_listener(self, listener: CommitListener) -> None:
        """Call ``listener(types)`` for commits in any process on any machine (LISTEN/NOTIFY).

        A closed store starts no listener: `close` would not stop it.
        """
        self._changes.add(listener)

    def remove_change_listener(self, listener: CommitListener) -> None:
        self._changes.remove(listener)

    def close(self, timeout: float = 5.0) -> None:
        """Close this process's pool and listener; other processes keep theirs.

        Transactions already running get up to ``timeout`` seconds; later
        calls raise `StoreClosed`.  Idempotent.
        """
        with self._lock:
            self._closed = True
            pool = self._pool if self._pool_pid == os.getpid() else None
            self._pool = None
        thread = self._changes.stop()
        if pool is not None:
            pool.close(timeout=timeout)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=max(timeout, 1.0))
