"""The host pool: the host processes a node starts, places actors in, and keeps warm.

The node's runtime asks the pool (a ``spawn`` system request) to place an
actor in a host of its own (``host="own"``) or a shared host by label; the
pool forks hosts from the zygote (`actors._core.host.zygote`), keeps one or
two warm spares forked in advance so a restart after a SIGKILL does not wait
for a fork and a boot, learns from each host when it is up and, through its
pidfd, when it died, and tells every other process what died with it.

All of it runs on the node runtime's I/O thread (system handlers, timers and
fd watches), so the records need no lock; `changed` is notified whenever a
host comes, goes or is placed, for whoever waits on that (the node's close,
tests).  What other nodes must hear of a host is the node's business: the
pool calls the hooks given to `serve`.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from actors._core.base import config as _config
from actors._core.host import sched as _sched
from actors._core.host.zygote import Zygote
from actors._core.runtime.runtime import DEFER, Runtime
from actors._core.transport.tcp import TcpSettings
from actors._core.wire import system as sysop

__all__ = ["HostInfo", "HostPool"]

log = logging.getLogger("actors.node")
_HOST_START_TIMEOUT = 20.0
_HALTED_GRACE = 0.25
_SPARE_AFTER_START = 0.005  # (spares that boot at SCHED_IDLE: at once, HostPool._refill_later)
_SPARE_DELAY = 0.2  # the latest a spare is forked after the last one was used
_MAX_SPARES = 2  # warm spares kept once restarts come faster than one spare boots


@dataclass
class HostInfo:
    """A host process as the node sees it."""

    proc: str
    label: str | None
    cpus: list[int] | None
    own: bool
    pid: int | None = None
    state: str = "starting"  # starting, up, dead
    pidfd: int | None = None
    started_at: float = field(default_factory=time.monotonic)
    queued: list[Any] = field(default_factory=list)
    halting: bool = False
    idle: bool = False  # booted at SCHED_IDLE and not yet put back (actors._core.host.sched)

    def to_dict(self) -> dict[str, Any]:
        return {
            "proc": self.proc,
            "label": self.label,
            "cpus": self.cpus,
            "own": self.own,
            "pid": self.pid,
            "state": self.state,
        }


class HostPool:
    """The host processes of one node, its warm spares, and the zygote they come from."""

    _rt: Runtime  # the node's runtime, from `serve` on
    _on_up: Callable[[str], None]
    _on_gone: Callable[[str, Any], None]

    def __init__(self, node_id: str, rundir: str, config: _config.Config) -> None:
        """Start the zygote (the caller holds the stop signals back meanwhile)."""
        self._node_id = node_id
        self._rundir = rundir
        self._config = config
        self.hosts: dict[str, HostInfo] = {}
        self.spares: list[HostInfo] = []  # warm spare hosts, oldest first
        self.spare_target = 1  # raised to _MAX_SPARES when a placement found no spare up
        self._spares_forked = 0
        self._shared: dict[str, str] = {}
        self._forwarded: dict[tuple[str, int | None], str] = {}
        self._host_counter = itertools.count(1)
        self.changed = threading.Condition()
        self.idle_spares = False
        #: Set by the node once it closes: no spare is forked any more, and a host that dies is
        #: reported with ``noconnection``.
        self.closed = False
        #: Where this node's hosts listen on tcp for other nodes (None: they do not).
        self.tcp: TcpSettings | None = None
        #: False: hosts build only plain data from other nodes' frames (``[cluster] trust_peers``).
        self.trust_peers = True
        self.normal_priority = _sched.current()  # the zygote's, so every host's
        self.zygote = Zygote(rundir)

    def probe_idle(self) -> None:
        """Whether spares may boot at SCHED_IDLE (a thread: after the zygote is forked)."""
        self.idle_spares = _sched.idle_reversible(self.normal_priority)

    def serve(self, rt: Runtime, on_up: Callable[[str], None], on_gone: Callable[[str, Any], None]) -> None:
        """Answer the node runtime ``rt``'s placement requests and its hosts' reports.

        ``on_up(proc)`` runs once host ``proc`` is connected, before any spawn
        reaches it; ``on_gone(proc, reason)`` once every process of this node
        has been told that ``proc`` died: both for what other nodes must hear."""
        self._rt = rt
        self._on_up = on_up
        self._on_gone = on_gone
        rt.register_sys_later(sysop.Spawn, self._on_spawn)
        rt.register_sys(sysop.SpawnDone, self._on_spawn_done)
        rt.register_sys(sysop.HostUp, self._on_host_up)
        rt.register_sys(sysop.Halting, self._on_halting)

    def in_use(self) -> list[HostInfo]:
        """The hosts placed or being placed (the warm spares are not)."""
        spares = {h.proc for h in list(self.spares)}
        return [h for h in list(self.hosts.values()) if h.proc not in spares]

    def up(self) -> list[HostInfo]:
        """Every host up, spares included."""
        return [h for h in list(self.hosts.values()) if h.state == "up"]

    def broadcast_config(self, section: str, key: str, value: str | None, persist: bool) -> None:
        for host in list(self.hosts.values()):
            if host.state == "up":
                self._rt.sys_send(host.proc, sysop.ApplyConfig(section, key, value))

    # -- placement ------------------------------------------------------------------------

    def _on_spawn(self, src: str, msg: sysop.Spawn, _ref: int | None) -> Any:
        host, cpus, payload = msg.host, msg.cpus, msg.payload
        if self.closed:
            self._rt.reply_sys(src, _ref, True, ("error", "node_closing"))
            return DEFER
        if self._rt.ended is not None:  # the incarnation ended: nothing new is placed
            self._rt.reply_sys(src, _ref, True, ("error", self._rt.refused().reason))
            return DEFER
        if host == "own":
            record = self._new_host(None, cpus, own=True)
        else:
            proc = self._shared.get(host)
            found = self.hosts.get(proc) if proc else None
            if found is None or found.state == "dead":
                record = self._new_host(host, cpus, own=False)
                self._shared[host] = record.proc
            elif cpus is not None and found.cpus != cpus:
                self._rt.reply_sys(src, _ref, True, ("error", ("host_cpus_mismatch", host, found.cpus)))
                return DEFER
            else:
                record = found

        def forward() -> None:
            self._forwarded[(src, _ref)] = record.proc
            self._rt.sys_send(record.proc, sysop.SpawnHere(src, _ref, payload))

        if record.state == "up":
            forward()
        else:
            record.queued.append((src, _ref, forward))
        return DEFER

    def _on_spawn_done(self, src: str, msg: sysop.SpawnDone) -> None:
        orig_src, orig_ref = msg.orig_src, msg.orig_ref
        self._forwarded.pop((orig_src, orig_ref), None)
        # Not at once either: the spawner's first call to the new actor
        # follows its spawn reply, and a fork now would compete with it.
        self._refill_later(_SPARE_AFTER_START)

    def _new_host(self, label: str | None, cpus: list[int] | None, own: bool) -> HostInfo:
        """A host for a placement: a warm spare when there is one, else a fresh fork.

        Keeping a spare forked in advance takes the fork and the host's boot
        (ZeroMQ context, bind, I/O thread, the first actor's thread) off the
        path of a restart.  The spare is told its role (exit when empty or
        not) and its CPUs just before the first spawn, on the same channel,
        so the order holds.  When a placement finds no spare up (restarts
        come faster than a spare boots), the node keeps two from then on.
        """
        spare = self._take_spare()
        if (spare is None and self._spares_forked) or (spare is not None and spare.state != "up"):
            self.spare_target = _MAX_SPARES  # (the first placement of all finds none: no news)
        if spare is not None:
            spare.label, spare.cpus, spare.own = label, cpus, own
            self._unidle(spare)
            spare.started_at = time.monotonic()  # from now, a placement waits on it (_host_timeout)
            spare.queued.insert(0, (None, None, lambda: self._rt.sys_send(spare.proc, sysop.Configure(own, cpus))))
            if spare.state == "up":
                first = spare.queued.pop(0)
                first[2]()
            record = spare
        else:
            record = self._fork_host(label, cpus, own)
        # The next spare is forked once the actor just placed has started
        # (its host says ``spawn_done``), not now: on a small machine the
        # fork and the new host's boot would compete for the CPU with that
        # start, which is what a restart waits on.  This timer is the latest.
        # (Spares that boot at SCHED_IDLE compete with nothing: forked now.)
        self._refill_later(_SPARE_DELAY)
        with self.changed:
            self.changed.notify_all()
        return record

    # -- warm spares ----------------------------------------------------------------------

    def _take_spare(self) -> HostInfo | None:
        """The spare that is up (else the one furthest in its boot), out of the pool."""
        live = [h for h in self.spares if h.state != "dead"]
        if not live:
            self.spares = []
            return None
        spare = next((h for h in live if h.state == "up"), live[0])
        self.spares = [h for h in live if h is not spare]
        return spare

    def _refill_later(self, delay: float) -> None:
        """Top the pool of spares up after ``delay``, or at once when spares boot at SCHED_IDLE.

        A spare booting at normal priority would take the CPU from the
        restart under way; one at SCHED_IDLE only takes what nothing else
        wants, so it may as well start now and be up sooner.
        """
        self._rt.call_later(0.0 if self.idle_spares else delay, self._fork_spare)

    def _fork_spare(self) -> None:
        """Top the pool of spares up by one (those still booting count)."""
        self.spares = [h for h in self.spares if h.state != "dead"]
        if self.closed or len(self.spares) >= self.spare_target:
            return
        self._spares_forked += 1
        spare = self._fork_host(None, None, False, idle=self.idle_spares)
        spare.label = "(spare)"
        self.spares.append(spare)
        with self.changed:
            self.changed.notify_all()

    def _unidle(self, record: HostInfo) -> None:
        """Every thread of a spare that booted at SCHED_IDLE back to the normal priority.

        Done by the node, before the spare is told anything: a thread at
        SCHED_IDLE could wait long for the CPU on a busy machine.  A spare
        taken while it boots is put back by the zygote (the node does not
        know its pid yet), and once more by the node when it says it is up,
        for a thread it started meanwhile from a thread still at SCHED_IDLE.
        """
        if not record.idle:
            return
        if record.pid is None:
            try:
                self.zygote.send(("unidle", record.proc))
            except OSError:
                pass  # the zygote is gone: so is the spare
            return
        _sched.restore(record.pid, self.normal_priority)
        record.idle = False

    # -- a host's life ------------------------------------------------------------------

    def _fork_host(self, label: str | None, cpus: list[int] | None, own: bool, idle: bool = False) -> HostInfo:
        proc = f"h{next(self._host_counter)}"
        record = HostInfo(proc, label, cpus, own, idle=idle)
        self.hosts[proc] = record
        boot = {
            "proc": proc,
            "node_id": self._node_id,
            "rundir": self._rundir,
            "node_proc": self._rt.proc,
            "cpus": cpus,
            "config": self._config.to_dict(),
            "exit_when_empty": own,
            "idle": idle,
            "zygote_pid": self.zygote.pid,
            "log_level": logging.getLogger().getEffectiveLevel(),
            "tcp": self.tcp,
            "trust_peers": self.trust_peers,
        }
        try:
            self.zygote.send(("fork", boot))
        except OSError as exc:
            log.error("cannot reach the zygote to start host %s: %s", proc, exc)
        self._rt.call_later(_HOST_START_TIMEOUT, lambda: self._host_timeout(proc))
        return record

    def _host_timeout(self, proc: str) -> None:
        record = self.hosts.get(proc)
        if record is None or record.state != "starting":
            return
        # An unused spare at SCHED_IDLE is not late, only patient (a busy
        # machine lends it little CPU); a spare taken while it boots has the
        # whole timeout from its placement.
        if record.idle and any(h is record for h in self.spares):
            left = _HOST_START_TIMEOUT
        else:
            left = record.started_at + _HOST_START_TIMEOUT - time.monotonic()
        if left > 0:
            self._rt.call_later(left, lambda: self._host_timeout(proc))
            return
        log.error("host %s did not start within %s s", proc, _HOST_START_TIMEOUT)
        record.state = "dead"
        for src, ref, _fwd in record.queued:
            if src is not None:
                self._rt.reply_sys(src, ref, True, ("error", "host_start_timeout"))
        record.queued.clear()

    def _on_host_up(self, src: str, msg: sysop.HostUp) -> None:
        proc, pid = msg.proc, msg.pid
        record = self.hosts.get(proc)
        if record is None or record.state != "starting":
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            return
        record.pid = pid
        record.state = "up"
        # Connect both ways now, off the path of the first spawn and call:
        # this process to the host, the host to this process's reply channels.
        self._rt.connect_peer(proc)
        # First, what died before this host was up: the deaths it was not told
        # of (told only to hosts up then).  Without it a ref into a dead
        # process, passed to an actor here later (an IOQ server given a file
        # of a SIGKILLed host), is sent to a socket nobody reads: a monitor
        # waits out its timeout instead of getting noproc.  Before any spawn
        # here, on the same channel, so no actor of this host can miss it.
        gone = list(self._rt.dead_procs.items())
        if gone:
            self._rt.sys_send(proc, sysop.ProcsDown(gone))
        self._rt.sys_send(proc, sysop.Connect(self._rt.channel_names()))
        self._on_up(proc)
        try:
            record.pidfd = os.pidfd_open(pid)
            self._rt.watch_fd(record.pidfd, lambda fd: self._on_host_exit(proc))
        except OSError:  # it died already
            self._on_host_exit(proc)
            return
        spare = any(h is record for h in self.spares)
        if not spare:  # a spare taken while it booted
            self._unidle(record)
        queued, record.queued = record.queued, []
        for _src, _ref, forward in queued:
            forward()
        if spare:
            self._refill_later(_SPARE_AFTER_START)  # the pool may want another
        with self.changed:
            self.changed.notify_all()

    def _on_halting(self, src: str, msg: sysop.Halting) -> None:
        proc = msg.proc
        record = self.hosts.get(proc)
        if record is not None:
            record.halting = True

    def _on_host_exit(self, proc: str) -> None:
        record = self.hosts.get(proc)
        if record is None or record.state == "dead":
            return
        record.state = "dead"
        self.spares = [h for h in self.spares if h is not record]
        if record.pidfd is not None:
            self._rt.unwatch_fd(record.pidfd)
            fd, record.pidfd = record.pidfd, None
            self._rt.call_soon(lambda: os.close(fd))
        if record.label and self._shared.get(record.label) == proc:
            del self._shared[record.label]
        # A host that halted on its own had no live actor left: anything still
        # pointing into it was pointing at the dead, which is ``noproc``.
        reason = "noproc" if record.halting else ("noconnection" if self.closed else "killed")
        if not record.halting and not self.closed:
            log.error("host process %s (pid %s) died: actors there exit with %r", proc, record.pid, reason)
        self._rt.registry.drop_proc(proc)
        for key, where in list(self._forwarded.items()):
            if where == proc:
                del self._forwarded[key]
                self._rt.reply_sys(key[0], key[1], True, ("error", reason))

        def broadcast() -> None:
            for other in self.hosts.values():
                if other.state == "up":
                    self._rt.sys_send(other.proc, sysop.ProcDown(proc, reason))
            self._rt.proc_down(proc, reason)
            self._on_gone(proc, reason)  # other nodes may point into it too

        if record.halting and not self.closed:
            # Every actor of a host that halted by itself has already sent its
            # own DOWNs, exit signals and call failures, with their true
            # reasons, on direct paths; let those land before the node speaks
            # for whatever got no answer.
            self._rt.call_later(_HALTED_GRACE, broadcast)
        else:
            broadcast()
        if not self.closed:
            self.hosts = {p: h for p, h in self.hosts.items() if h.state != "dead" or p == proc}
        with self.changed:
            self.changed.notify_all()

    # -- the end ----------------------------------------------------------------------------

    def halt(self, deadline: float) -> None:
        """Ask every host to halt, wait for them until ``deadline`` (3 s at most), SIGKILL the rest."""
        for record in list(self.hosts.values()):
            if record.state != "dead":
                self._rt.sys_send(record.proc, sysop.Halt())
        with self.changed:
            self.changed.wait_for(
                lambda: (
                    all(h.state != "starting" and h.state != "up" for h in self.hosts.values())
                    or time.monotonic() > deadline
                ),
                timeout=max(0.1, min(3.0, deadline - time.monotonic())),
            )
        for record in list(self.hosts.values()):
            if record.state != "dead" and record.pid:
                try:
                    os.kill(record.pid, signal.SIGKILL)
                except OSError:
                    pass
