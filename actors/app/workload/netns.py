"""Several machines on one machine: Linux network namespaces on a bridge, and the faults of a real network.

A `Topology` is a "switch" (a namespace holding a bridge) and hosts (one
namespace each, one veth into the switch, one address in ``10.77.0.0/24``).
Every name it makes starts with ``otpy<pid>x`` (the test process's pid), so
parallel runs never clash; addresses may be the same in every run, since
each run's hosts live in namespaces of their own and no packet leaves them.
`Topology.close` removes it all (and SIGKILLs what still runs inside), and
`sweep_stale` removes what a run that was SIGKILLed left behind.

Faults, each undone by `heal`:

* `cut` -- the host's port on the switch goes down: it reaches nobody and
  nobody reaches it (an unplugged cable; tcp sees silence, not a reset);
* `cut_pair` -- blackhole routes on two hosts to each other only, so each
  still reaches the others and membership differs from node to node;
* `slow` -- a token bucket (``tc qdisc ... tbf``) on the host's port;
* `freeze` / `thaw` -- SIGSTOP / SIGCONT of every process in the host's
  namespace; `crash` -- SIGKILL of every one of them.

Needs root and iproute2 (`ip`, `tc`); `missing` says what is absent.  The
tests (``tests/hosts/``) and ``demo --nodes N --hosts`` both use it.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence

__all__ = ["Host", "Topology", "enter", "missing", "sweep_stale"]

SUBNET = "10.77.0"
_PREFIX = "otpy"
_STALE = re.compile(rf"^{_PREFIX}(\d+)x")
_counter = itertools.count(1)
_CLONE_NEWNET = 0x40000000


def missing() -> str | None:
    """Why namespace hosts cannot be made here (not root, no `ip`/`tc`), or None."""
    if os.geteuid() != 0:
        return "network-namespace hosts need root (run the tests as root, as CI does)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"network-namespace hosts need `{tool}` (apt-get install iproute2)"
    try:
        _ip("netns", "list")
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"`ip netns` does not work here: {exc}"
    return None


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=30)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run("ip", *args, check=check)


def netns_pids(ns: str) -> list[int]:
    """Every process whose network namespace is ``ns`` (what runs on that host)."""
    out = _ip("netns", "pids", ns, check=False).stdout
    return [int(word) for word in out.split() if word.isdigit()]


def _signal_all(ns: str, sig: int) -> None:
    for pid in netns_pids(ns):
        if pid == os.getpid():  # a program that entered one of its hosts (`enter`) is not among its victims
            continue
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _dead_run(name: str) -> bool:
    """Whether ``name`` was made by a run (``otpy<pid>x...``) whose process is gone."""
    m = _STALE.match(name)
    if m is None:
        return False
    try:
        os.kill(int(m.group(1)), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False  # that run is alive: what it made is its own


def sweep_stale() -> list[str]:
    """Delete the namespaces, and the temporary folders named after them (a database host's data),
    of runs whose process is gone (a SIGKILLed pytest or demo); returns their names."""
    removed = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if not _dead_run(name):
            continue
        _signal_all(name, signal.SIGKILL)
        _ip("netns", "del", name, check=False)
        removed.append(name)
    tmp = tempfile.gettempdir()
    for entry in os.listdir(tmp):
        if _dead_run(entry):
            shutil.rmtree(os.path.join(tmp, entry), ignore_errors=True)
            removed.append(os.path.join(tmp, entry))
    return removed


def enter(ns: str) -> None:
    """Move the calling thread into network namespace ``ns`` (``setns``), as ``ip netns exec`` does
    for a new process: threads and processes it starts afterwards are there too, those started
    before stay where they were.  For a program that must itself be one of the hosts."""
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {ns}: {os.strerror(err)}")
    finally:
        os.close(fd)


class Host:
    """One machine: a namespace, its address, and its port (veth end) on the switch."""

    def __init__(self, topo: "Topology", name: str, index: int) -> None:
        self.topo = topo
        self.name = name
        self.ns = f"{topo.prefix}{name}"
        self.address = f"{SUBNET}.{index}"
        self.port = f"p{index}"  # its veth end inside the switch namespace
        self.frozen = False

    def __repr__(self) -> str:
        return f"<Host {self.name} {self.address} ns={self.ns}>"

    def exec_prefix(self) -> list[str]:
        """Prepend to a command to run it on this host."""
        return ["ip", "netns", "exec", self.ns]

    def sh(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a short command on this host and wait for it."""
        return _run(*self.exec_prefix(), *cmd, check=check)

    def pids(self) -> list[int]:
        return netns_pids(self.ns)

    def reaches(self, other: "Host", timeout: float = 1.0) -> bool:
        """Whether a tcp SYN from here to ``other`` gets an answer (a refusal counts: no ping needed)."""
        probe = (
            "import socket,sys\n"
            "try: socket.create_connection((sys.argv[1], 9), timeout=float(sys.argv[2])).close()\n"
            "except ConnectionRefusedError: pass\n"
            "except OSError: sys.exit(1)\n"
        )
        return self.sh(sys.executable, "-c", probe, other.address, str(timeout), check=False).returncode == 0


class Topology:
    """A switch and hosts; see the module's docstring.  Use as a context manager,
    or call `close` in a ``finally``: it removes everything even after a failure
    halfway through building."""

    def __init__(self, names: Sequence[str]) -> None:
        self.prefix = f"{_PREFIX}{os.getpid()}x{next(_counter)}"
        self.switch = f"{self.prefix}sw"
        self.hosts: dict[str, Host] = {}
        self._pair_cuts: set[frozenset[str]] = set()
        self._made: list[str] = []
        try:
            sweep_stale()
            self._make_ns(self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            for index, name in enumerate(names, start=1):
                self.add_host(name, index)
        except BaseException:
            self.close()
            raise

    def _make_ns(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self._made.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")

    def add_host(self, name: str, index: int) -> Host:
        if not 1 <= index <= 250 or name in self.hosts:
            raise ValueError(f"host {name!r} index {index}: a new name and an index in 1..250")
        host = Host(self, name, index)
        self._make_ns(host.ns)
        tmp = f"o{os.getpid()}x{index}"  # briefly in the root namespace: unique per run
        _ip("link", "add", tmp, "netns", host.ns, "type", "veth", "peer", "name", host.port, "netns", self.switch)
        _ip("-n", host.ns, "link", "set", tmp, "name", "eth0")
        _ip("-n", host.ns, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _ip("-n", host.ns, "link", "set", "eth0", "up")
        _ip("-n", self.switch, "link", "set", host.port, "master", "br0")
        _ip("-n", self.switch, "link", "set", host.port, "up")
        self.hosts[name] = host
        return host

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def __enter__(self) -> "Topology":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- faults -------------------------------------------------------------------

    def cut(self, name: str) -> None:
        """Unplug host ``name`` from the switch: it reaches nobody, nobody reaches it."""
        _ip("-n", self.switch, "link", "set", self.hosts[name].port, "down")

    def uncut(self, name: str) -> None:
        _ip("-n", self.switch, "link", "set", self.hosts[name].port, "up")

    def cut_pair(self, a: str, b: str) -> None:
        """Blackhole routes between hosts ``a`` and ``b`` only (both ways)."""
        for x, y in ((a, b), (b, a)):
            _ip("-n", self.hosts[x].ns, "route", "add", "blackhole", f"{self.hosts[y].address}/32")
        self._pair_cuts.add(frozenset((a, b)))

    def uncut_pair(self, a: str, b: str) -> None:
        for x, y in ((a, b), (b, a)):
            _ip("-n", self.hosts[x].ns, "route", "del", "blackhole", f"{self.hosts[y].address}/32", check=False)
        self._pair_cuts.discard(frozenset((a, b)))

    def slow(self, name: str, rate: str = "256kbit", burst: str = "16kb", latency: str = "200ms") -> None:
        """A token bucket on the host's port: everything it sends goes at ``rate``."""
        self.hosts[name].sh(
            "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate, "burst", burst, "latency", latency
        )

    def unslow(self, name: str) -> None:
        self.hosts[name].sh("tc", "qdisc", "del", "dev", "eth0", "root", check=False)

    def freeze(self, name: str) -> None:
        """SIGSTOP everything running on host ``name`` (a hung machine, a long GC pause)."""
        self.hosts[name].frozen = True
        _signal_all(self.hosts[name].ns, signal.SIGSTOP)

    def thaw(self, name: str) -> None:
        _signal_all(self.hosts[name].ns, signal.SIGCONT)
        self.hosts[name].frozen = False

    def crash(self, name: str) -> None:
        """SIGKILL everything running on host ``name``."""
        _signal_all(self.hosts[name].ns, signal.SIGKILL)
        _signal_all(self.hosts[name].ns, signal.SIGCONT)

    def heal(self, names: Iterable[str] | None = None) -> None:
        """Undo every fault on ``names`` (default: all hosts): ports up, pair cuts gone, no bucket, thawed."""
        chosen = set(self.hosts if names is None else names)
        for pair in list(self._pair_cuts):
            if pair & chosen:
                self.uncut_pair(*sorted(pair))
        for name in chosen:
            self.uncut(name)
            self.unslow(name)
            if self.hosts[name].frozen:
                self.thaw(name)

    # -- teardown -----------------------------------------------------------------

    def close(self) -> None:
        """SIGKILL what still runs on the hosts and delete every namespace (their veths go with them)."""
        for ns in reversed(self._made):
            _signal_all(ns, signal.SIGCONT)
            _signal_all(ns, signal.SIGKILL)
            _ip("netns", "del", ns, check=False)
        self._made.clear()
