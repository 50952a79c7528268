"""PostgreSQL on a host of its own: the "database host" of a namespace topology (`actors.app.workload.netns`).

The server is Debian's ``postgresql`` (``/usr/lib/postgresql/*/bin``, or
``postgres`` on PATH), run as the ``postgres`` system user (it refuses
root) in the database host's namespace, listening on that host's address
(nodes reach it over the topology's network, so cutting a host off from the
database host cuts it off from the database) and on a unix socket in its
data directory (the test reaches it there whatever the network does).
Trust authentication inside the topology's private subnet: nothing outside
the namespaces can reach it.
"""

from __future__ import annotations

import glob
import os
import pwd
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable

from actors.app.workload.netns import SUBNET, Host

__all__ = ["PostgresHost", "postgres_host_missing"]

DATABASE = "otpy"
_READY = "database system is ready to accept connections"


def _bindir() -> str | None:
    found = shutil.which("postgres")
    if found:
        return os.path.dirname(os.path.realpath(found))
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    return dirs[-1] if dirs else None


def postgres_host_missing() -> str | None:
    """Why PostgreSQL cannot run on a namespace host here, or None."""
    if _bindir() is None:
        return "the database host needs PostgreSQL's server: apt-get install postgresql"
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return "the database host runs PostgreSQL as the 'postgres' user: apt-get install postgresql makes it"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "the database host needs psycopg: pip install -e '.[test]'"
    return None


class PostgresHost:
    """A PostgreSQL server on ``host``; `url` is what nodes use, `local_url` what the test uses."""

    def __init__(self, host: Host, port: int = 5432) -> None:
        self.host = host
        self.port = port
        bindir = _bindir()
        assert bindir is not None, postgres_host_missing()
        user = pwd.getpwnam("postgres")
        self.root = tempfile.mkdtemp(prefix=f"{host.ns}-pg-")
        os.chown(self.root, user.pw_uid, user.pw_gid)
        self.data = os.path.join(self.root, "data")
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str] = queue.Queue()
        try:
            subprocess.run(
                [
                    "runuser",
                    "-u",
                    "postgres",
                    "--",
                    os.path.join(bindir, "initdb"),
                    "-D",
                    self.data,
                    "-A",
                    "trust",
                    "-U",
                    "postgres",
                    "--no-sync",
                    "-E",
                    "UTF8",
                ],
                check=True,
                capture_output=True,
                text=True,
                timeout=120,
            )
            with open(os.path.join(self.data, "pg_hba.conf"), "a", encoding="utf-8") as fh:
                fh.write(f"host all all {SUBNET}.0/24 trust\n")
            self.proc = subprocess.Popen(
                [
                    *host.exec_prefix(),
                    "runuser",
                    "-u",
                    "postgres",
                    "--",
                    os.path.join(bindir, "postgres"),
                    "-D",
                    self.data,
                    "-p",
                    str(port),
                    "-k",
                    self.root,
                    "-c",
                    f"listen_addresses={host.address}",
                    "-c",
                    "fsync=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "full_page_writes=off",
                    "-c",
                    "max_connections=200",
                    "-c",
                    "shared_buffers=32MB",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            threading.Thread(target=self._read, daemon=True, name="pg-host-log").start()
            line = self._await_log(lambda ln: _READY in ln or ln == "EOF", 60.0)
            if line is None or line == "EOF":
                raise RuntimeError(f"PostgreSQL on {host.name} did not start: {line}")
            import psycopg

            with psycopg.connect(self.local_url("postgres"), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{DATABASE}"')
        except BaseException:
            self.close()
            raise

    def _await_log(self, match: Callable[[str], bool], timeout: float) -> str | None:
        """The first log line that ``match``es within ``timeout`` s, or None."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return None
            if match(line):
                return line
        return None

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("EOF")

    @property
    def url(self) -> str:
        """The database over the topology's network, as nodes reach it."""
        return f"postgresql://postgres@{self.host.address}:{self.port}/{DATABASE}"

    def local_url(self, database: str = DATABASE) -> str:
        """The database over its unix socket, as the test reaches it (no network involved)."""
        return f"postgresql://postgres@/{database}?host={self.root}&port={self.port}"

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # runuser passes it on: a fast shutdown
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)
