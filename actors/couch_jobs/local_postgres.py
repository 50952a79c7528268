"""A throwaway PostgreSQL server for the demo, the benchmarks and the tests.

No system service and no TCP port: the server lives in a directory of your
choosing and listens on a unix socket only, with trust authentication (only
this machine's users who can reach the socket's directory get in).  For
trying the PostgreSQL store on one machine; a deployment points
``[couch_jobs] store`` at a real server instead (see docs/couch_jobs.md).

Its binaries (``initdb``, ``pg_ctl``, ``postgres``) come from whichever is
here, in this order: the ``pgserver`` wheel (``pip install pgserver``, part
of the test extra where a wheel exists for this Python), or the system's
PostgreSQL (Debian's ``postgresql`` package, ``/usr/lib/postgresql/*/bin``,
or ``pg_ctl`` on PATH).  Either way the same code runs them: one path.
PostgreSQL refuses to run as root, so under root the server runs as the
``postgres`` user when there is one (the system package makes it), else as
``nobody``, with its data in a directory of its own under the system's
temporary directory (which that user can reach), given to that user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from urllib.parse import quote

from .errors import StoreUnavailable

__all__ = ["HOW_TO_GET", "START_TIMEOUT", "LocalPostgres", "find_bindir", "local_postgres"]

#: Seconds ``pg_ctl start`` may take (a loaded 2-core machine starts a postmaster slowly).
START_TIMEOUT = 90
#: What to install for a local PostgreSQL: either source of binaries, and the driver.
HOW_TO_GET = (
    "a local PostgreSQL needs its binaries: pip install pgserver (Python < 3.13), or the system's "
    "(Debian: apt-get install postgresql); and the driver: pip install 'psycopg[binary]' psycopg_pool "
    "(or: pip install -e '.[test]')"
)
_TOOLS = ("initdb", "pg_ctl", "postgres")


def _pgserver_bindir() -> str | None:
    try:
        # pgserver's platformdirs warns at import when XDG_RUNTIME_DIR is unset
        # (any container, any cron job); that says nothing to our users.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
            from pgserver._commands import POSTGRES_BIN_PATH
    except ImportError:
        return None
    return str(POSTGRES_BIN_PATH)


def _has_tools(bindir: str) -> bool:
    return all(os.access(os.path.join(bindir, tool), os.X_OK) for tool in _TOOLS)


def find_bindir() -> str | None:
    """The directory of ``initdb``, ``pg_ctl`` and ``postgres``: pgserver's, else the system's; None."""
    candidates = [_pgserver_bindir()]
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(os.path.dirname(os.path.realpath(on_path)))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    return next((d for d in candidates if d and _has_tools(d)), None)


def _version(path: str) -> tuple[int, ...]:
    digits = os.path.basename(os.path.dirname(path))
    return tuple(int(part) for part in digits.split(".") if part.isdigit())


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the server: this process's user, or (under root, which PostgreSQL refuses) another."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise StoreUnavailable("a local PostgreSQL cannot run as root, and there is no 'postgres' or 'nobody' user")


class LocalPostgres:
    """A PostgreSQL server with its data in ``pgdata`` (made when missing; under root, see
    the module's docstring), started at once.

    `url` gives a database's URL; `stop` (``immediate``: as a crash) and `start`
    take it away and bring it back; `close` stops it and deletes its files."""

    def __init__(self, pgdata: str | os.PathLike[str], *, start_timeout: int = START_TIMEOUT) -> None:
        bindir = find_bindir()
        if bindir is None:
            raise StoreUnavailable(HOW_TO_GET)
        self.bindir = bindir
        self.start_timeout = start_timeout
        self.user = _server_user()
        # A short path of its own for the socket (a unix socket's path holds 107 bytes, and
        # pgdata may be deep); under root the data goes there too, since the server's user
        # may not be able to reach the directory given (a private temporary directory, say).
        self.socket_dir = tempfile.mkdtemp(prefix="otpy-pg-")
        given = os.path.abspath(os.fspath(pgdata))
        self.pgdata = given if self.user is None else os.path.join(self.socket_dir, "data")
        os.makedirs(self.pgdata, mode=0o700, exist_ok=True)
        if self.user is not None:
            for path in (self.socket_dir, self.pgdata):
                os.chown(path, self.user.pw_uid, self.user.pw_gid)
        self.running = False
        try:
            if not os.path.exists(os.path.join(self.pgdata, "PG_VERSION")):
                self._run("initdb", "-D", self.pgdata, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
            self.start()
        except BaseException:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            raise

    @property
    def port(self) -> int:
        return 5432  # the default: the socket file is .s.PGSQL.5432 in socket_dir

    def url(self, database: str = "postgres") -> str:
        """``postgresql://postgres@/DATABASE?host=SOCKET_DIR``: over the unix socket only."""
        return f"postgresql://postgres@/{quote(database)}?host={quote(self.socket_dir, safe='/')}"

    def _run(self, tool: str, *args: str, timeout: float = 120) -> str:
        kwargs: dict[str, object] = {}
        env = dict(os.environ, LC_ALL="C")
        if self.user is not None:
            kwargs = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
            env["HOME"] = self.pgdata
        try:
            done = subprocess.run(
                [os.path.join(self.bindir, tool), *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                cwd=self.pgdata,
                check=True,
                **kwargs,  # type: ignore[arg-type]
            )
        except subprocess.CalledProcessError as exc:
            raise StoreUnavailable(
                f"local PostgreSQL: {tool} failed ({exc.returncode}): {(exc.stderr or exc.stdout).strip()[-500:]}; "
                f"its log: {self._log_tail()}"
            ) from None
        except subprocess.TimeoutExpired:
            raise StoreUnavailable(
                f"local PostgreSQL: {tool} took over {timeout:g} s; log: {self._log_tail()}"
            ) from None
        return done.stdout

    def start(self) -> None:
        """Start the server; returns once it accepts connections."""
        self._run(
            "pg_ctl",
            "-D",
            self.pgdata,
            "-w",
            "-t",
            str(self.start_timeout),
            "-l",
            os.path.join(self.pgdata, "log"),
            "-o",
            f"-h '' -k {self.socket_dir} -c fsync=off -c full_page_writes=off",
            "start",
            timeout=self.start_timeout + 30,
        )
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (clients disconnected, a clean shutdown) or ``immediate`` (a crash)."""
        self._run("pg_ctl", "-D", self.pgdata, "-w", "-m", mode, "stop")
        self.running = False

    def close(self) -> None:
        """Stop it (if it runs) and delete its data and socket directories."""
        try:
            if self.running:
                self.stop("fast")
        except StoreUnavailable:
            with contextlib.suppress(StoreUnavailable):
                self.stop("immediate")
        finally:
            shutil.rmtree(self.pgdata, ignore_errors=True)
            shutil.rmtree(self.socket_dir, ignore_errors=True)

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self.pgdata, "log"), encoding="utf-8", errors="replace") as f:
                lines = [line.strip() for line in f if line.strip()]
        except OSError:
            return "(none)"
        return " | ".join(lines[-3:]) or "(empty)"


@contextlib.contextmanager
def local_postgres(directory: str | os.PathLike[str]) -> Iterator[str]:
    """Start a PostgreSQL server in ``directory``; yields its URL; stops and deletes it at exit."""
    root = os.fspath(directory)
    os.makedirs(root, exist_ok=True)
    server = LocalPostgres(os.path.join(root, "data"))
    try:
        yield server.url()
    finally:
        server.close()
