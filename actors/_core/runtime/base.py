"""The runtime's ground floor: the state every other part of it shares.

A process's runtime holds its `Transport` (it is not one: the transport
knows nothing of actors and hands frames up through the runtime's
`Upcalls`).  This floor keeps what the runtime's parts share -- the cells
and sinks of the process, the calls pending, ids, the known-dead nodes -- and
the table that hands a signal to the handler for its kind.  Each floor
above adds one job (`actors._core.runtime.runtime` names them) and
registers the handlers for the kinds that job receives.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actors._core.base import config as _config
from actors._core.net.direct import DirectLinks
from actors._core.runtime.meter import Meters
from actors._core.runtime.scheduler import Scheduler, scheduler_from_config
from actors._core.runtime.unheard import UnheardFrames
from actors._core.transport.transport import SEND_WAIT, Transport
from actors._core.wire import ref as _ref
from actors._core.wire.codec import wrap_relay
from actors._core.wire.fragments import Reassembly
from actors._core.wire.reasons import IncarnationEnded
from actors._core.wire.ref import ActorRef

if TYPE_CHECKING:
    from actors._core.cell.cell import Cell

__all__ = ["KindHandler", "RuntimeBase"]

log = logging.getLogger("actors.runtime")

_scheduler_lock = threading.Lock()

#: ``handler(kind, to, frm, ref, body, src)``: one signal of ``kind`` for actor
#: ``to`` (or for the runtime itself), from process ``src``.
KindHandler = Callable[[int, Any, Any, Any, Any, str], None]


class RuntimeBase:
    """Process-local kernel state on top of the process's transport."""

    def __init__(self, node_id: str, transport: Transport, node_proc: str = "n") -> None:
        self.transport = transport
        self.node_id = node_id
        self.node_proc = node_proc
        self.rundir = transport.rundir
        self.proc = transport.proc
        self.pid = transport.pid
        self.is_node = self.proc == node_proc
        self.stats = transport.stats
        #: Processes known gone (the transport's own record: sends to them are dropped).
        self.dead_procs = transport.dead_procs
        # What the layers above use of the transport, reached without a hop.
        self.send_frame = transport.send_frame
        self.connect_peer = transport.connect_peer
        self.mark_gone = transport.mark_gone
        self.close_peer = transport.close_peer
        self.reply_channel = transport.reply_channel
        self.add_timer = transport.add_timer
        self.call_later = transport.call_later
        self.call_soon = transport.call_soon
        self.watch_fd = transport.watch_fd
        self.unwatch_fd = transport.unwatch_fd
        self.lend_endpoint = transport.lend_endpoint
        self.endpoint_of = transport.endpoint_of
        self.cells: dict[str, Cell] = {}
        #: Per-class call, cast and exit counts of this process's actors (`actors._core.runtime.meter`).
        self.meters = Meters()
        self.sinks: dict[str, Any] = {}
        #: Outstanding requests (ref -> waiter: anything with ``proc`` and ``resolve(ok, value)``).
        self.pending: dict[int, Any] = {}
        self._ref_counter = itertools.count(1)
        self._id_counter = itertools.count(1)
        self.dropped_frames = 0
        self.registry: Any = None  # set in the node process
        self.on_cell_gone: Callable[[Cell], None] | None = None
        #: In a distributed node's node process: hands a frame for another
        #: node's process to the node-to-node link.  Elsewhere None: hosts
        #: hand such frames to their node process.
        self.relay: Callable[[str, bytes], None] | None = None
        #: Why this node's incarnation ended, once it has (`actors._core.runtime.deaths`):
        #: spawns in this process fail from then on, and calls too once ``calls_refused``.
        self.ended: str | None = None
        self.calls_refused = False
        #: Other nodes known lost (node id -> reason).
        self.dead_nodes: dict[str, Any] = {}
        #: In a process of a distributed node: its own connections to the
        #: processes of other nodes (`actors._core.net.direct`), opened for a
        #: node the node process told it of (the node process: one its link
        #: is up with); it also remembers the processes it reached through
        #: the relay, whose frames keep that one path.
        self.direct: DirectLinks | None = None
        if "@" in node_id:
            # Backpressure as on the ipc pipes: any thread but the I/O thread
            # waits for room on a full connection.
            self.direct = DirectLinks(
                transport.ctx, node_id, self.proc, transport.io_thread, SEND_WAIT, via_node=not self.is_node
            )
        self._scheduler: Scheduler | None = None
        #: Big frames from other nodes arriving in fragments, by origin
        #: (`actors._core.wire.fragments`); whoever reads the endpoint adds to it.
        self.fragments = Reassembly(on_drop=lambda origin, why: self.stats.increment("actors.net.fragments_dropped"))
        self.fragments_lock = threading.Lock()
        #: Frames straight from a node this process was not told is up yet
        #: (`actors._core.runtime.unheard`): handled once it is, dropped if it is lost.
        self.unheard = UnheardFrames()
        #: The handler of each frame kind (`handle_kind`); unknown kinds are garbage.
        self._kinds: dict[int, KindHandler] = {}
        _ref.local_node_ids.add(node_id)

    # -- the table of kinds ------------------------------------------------------

    def handle_kind(self, kind: int, handler: KindHandler) -> None:
        """Hand every signal of ``kind`` to ``handler``."""
        self._kinds[kind] = handler

    def _deliver(self, kind: int, to: Any, frm: Any, ref: Any, body: Any, src: str) -> None:
        """One signal, to the handler of its kind."""
        try:
            handler = self._kinds[kind]
        except (KeyError, TypeError):  # no such kind: garbage, dropped and counted
            self._count_garbage()
            return
        handler(kind, to, frm, ref, body, src)

    def _count_garbage(self) -> None:
        self.dropped_frames += 1
        self.stats.increment("actors.transport.dropped_frames")

    # -- the scheduler ------------------------------------------------------------

    @property
    def scheduler(self) -> Scheduler:
        """The process's scheduler (`actors._core.runtime.scheduler`), made
        with the first actor that runs on it, from the ``[scheduler]``
        section of the configuration."""
        sched = self._scheduler
        if sched is None:
            with _scheduler_lock:
                sched = self._scheduler
                if sched is None:
                    sched = self._scheduler = scheduler_from_config(
                        _config.current(),
                        stats=self.stats,
                        name=f"actors-{self.proc}",
                        on_worker_exit=self.transport.release_thread_sockets,
                    )
        return sched

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        self.transport.start()

    def shutdown(self, linger: bool = False) -> None:
        """Stop the I/O thread and close every socket.

        With ``linger`` the sockets first deliver what they hold (a host that
        halts must not lose its last exit signals); otherwise they drop it.
        """
        if self._scheduler is not None:
            self._scheduler.close()
        if self.direct is not None:
            self.direct.close(linger)
        self.transport.shutdown(linger)

    def send_remote(self, dest: str, frame: bytes) -> None:
        """A frame for a process of another node: the node process sends it
        over the link; a host on its own connection to that node when it has
        one (`actors._core.net.direct`), else through its node process."""
        relay = self.relay
        if relay is not None:  # the node process: it checks the node is up first
            relay(dest, frame)
            return
        direct = self.direct
        if direct is not None:
            node_id, _, proc = dest.partition("|")
            if direct.send(node_id, proc, frame):
                return
        self.send_frame(self.node_proc, wrap_relay(dest, frame))

    def refused(self) -> IncarnationEnded:
        """What a spawn or call in a process of an ended incarnation raises."""
        return IncarnationEnded(self.node_id, self.ended or "ended")

    # -- ids -----------------------------------------------------------------

    def new_actor_id(self) -> str:
        return f"{self.proc}.{next(self._id_counter)}"

    def new_ref(self) -> int:
        return next(self._ref_counter)

    def make_ref(self, actor_id: str, name: str | None = None) -> ActorRef:
        return ActorRef(self.node_id, self.proc, actor_id, self.pid, name, port=self.transport.tcp_port)

    def _dead_reason(self, proc: str) -> str:
        """What a request to a process known gone fails with: ``noconnection``
        for one of another node that was lost, ``noproc`` otherwise."""
        return "noconnection" if self.dead_procs.get(proc) == "noconnection" and "|" in proc else "noproc"
