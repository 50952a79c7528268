"""A throwaway PostgreSQL server for the demo and the benchmark (the ``pgserver`` wheel).

No root, no system service, no TCP port: the server lives in a directory
of your choosing and listens on a unix socket there.  For trying the
PostgreSQL store on one machine; a deployment points ``[couch_jobs] store``
at a real server instead (see docs/couch_jobs.md).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import warnings
from collections.abc import Iterator

from .errors import StoreUnavailable

try:  # optional: pip install pgserver (part of the test extra)
    # pgserver's platformdirs warns at import when XDG_RUNTIME_DIR is unset
    # (any container, any cron job); that says nothing to our users.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import pgserver
except ImportError:  # pragma: no cover - exercised only without it
    pgserver = None

__all__ = ["HOW_TO_GET", "START_ATTEMPTS", "local_postgres", "start_server"]

#: How many times `start_server` asks pgserver before giving up.
START_ATTEMPTS = 3

HOW_TO_GET = "pip install pgserver 'psycopg[binary]' psycopg_pool (or: pip install -e '.[test]')"


@contextlib.contextmanager
def local_postgres(directory: str | os.PathLike[str]) -> Iterator[str]:
    """Start a PostgreSQL cluster in ``directory``; yields its URL; stops and deletes it at exit."""
    if pgserver is None:
        raise StoreUnavailable(f"a local PostgreSQL needs the pgserver wheel: {HOW_TO_GET}")
    root = os.fspath(directory)
    os.makedirs(root, exist_ok=True)
    os.chmod(root, 0o755)  # run as root, pgserver runs the server as its own user
    server = start_server(os.path.join(root, "data"))
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def start_server(pgdata: str, attempts: int = START_ATTEMPTS) -> "pgserver.PostgresServer":
    """``pgserver.get_server(pgdata)``, surviving pgserver's fixed 10-second start timeout.

    pgserver waits for ``pg_ctl start`` at most 10 s; on a loaded machine the
    postmaster can take longer and pgserver then fails, although the server
    is still coming up.  Asking again attaches to that server (pgserver finds
    its ``postmaster.pid`` and waits until it is ready), so a bounded number
    of further asks turns a slow start into a working one.
    """
    if pgserver is None:
        raise StoreUnavailable(f"a local PostgreSQL needs the pgserver wheel: {HOW_TO_GET}")
    last: BaseException | None = None
    for _ in range(attempts):
        try:
            return pgserver.get_server(pgdata, cleanup_mode="delete")
        except (subprocess.TimeoutExpired, subprocess.CalledProcessError, FileNotFoundError) as exc:
            last = exc
    raise StoreUnavailable(
        f"could not start a local PostgreSQL in {pgdata}: {last.__class__.__name__}; "
        f"its log: {_log_tail(os.path.join(pgdata, 'log'))}"
    ) from None


def _log_tail(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return "(none)"
    return " | ".join(lines[-3:]) or "(empty)"
