"""A throwaway PostgreSQL server for the demo and the benchmark (the ``pgserver`` wheel).

No root, no system service, no TCP port: the server lives in a directory
of your choosing and listens on a unix socket there.  For trying the
PostgreSQL store on one machine; a deployment points ``[couch_jobs] store``
at a real server instead (see docs/couch_jobs.md).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from .errors import StoreUnavailable

try:  # optional: pip install pgserver (part of the test extra)
    import pgserver
except ImportError:  # pragma: no cover - exercised only without it
    pgserver = None

__all__ = ["HOW_TO_GET", "local_postgres"]

HOW_TO_GET = "pip install pgserver 'psycopg[binary]' psycopg_pool (or: pip install -e '.[test]')"


@contextlib.contextmanager
def local_postgres(directory: str | os.PathLike[str]) -> Iterator[str]:
    """Start a PostgreSQL cluster in ``directory``; yields its URL; stops and deletes it at exit."""
    if pgserver is None:
        raise StoreUnavailable(f"a local PostgreSQL needs the pgserver wheel: {HOW_TO_GET}")
    root = os.fspath(directory)
    os.makedirs(root, exist_ok=True)
    os.chmod(root, 0o755)  # run as root, pgserver runs the server as its own user
    data = os.path.join(root, "data")
    try:
        server = pgserver.get_server(data, cleanup_mode="delete")
    except Exception as exc:  # pgserver raises CalledProcessError/TimeoutExpired
        raise StoreUnavailable(
            f"could not start a local PostgreSQL in {data}: {exc.__class__.__name__}; "
            f"its log: {_log_tail(os.path.join(data, 'log'))}"
        ) from None
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def _log_tail(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return "(none)"
    return " | ".join(lines[-3:]) or "(empty)"
