"""The death of a whole process, of a whole other node, or of this node's incarnation.

Everything here that pointed into the dead process -- calls pending, links,
monitors, sinks -- is failed or told (``noproc``, or ``noconnection`` for a
lost node), and later sends to it are dropped.  When this node's own
incarnation ends, the process first refuses spawns (so no supervisor restarts
what is being stopped), then ends every actor it holds (`end_incarnation`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from actors._core.runtime.signals import Signals
from actors._core.wire.reasons import INCARNATION_ENDED

__all__ = ["Deaths"]


class Deaths(Signals):
    """Process and node deaths."""

    def proc_down(self, proc: str, reason: Any) -> None:
        """A whole OS process of the node died: fail what pointed into it.

        Its sockets and socket files are cleaned up last, once everything
        here that pointed into it has been told (a supervisor restarting a
        child waits on this)."""
        if not self.mark_gone(proc, reason):
            return
        for ref, waiter in list(self.pending.items()):
            if waiter.proc == proc and self.pending.pop(ref, None) is not None:
                waiter.resolve(False, reason)
        for cell in list(self.cells.values()):
            cell.proc_down(proc, reason)
        for sink in list(self.sinks.values()):
            sink.proc_down(proc, reason)
        self.close_peer(proc)
        if self.direct is not None and "|" in proc:
            self.direct.forget_proc(proc)

    def procs_gone_before(self, gone: Iterable[Sequence[Any]]) -> None:
        """``[(proc, reason)]``: processes that died before this one was up
        (the node tells a new host, before its first spawn).  Nothing here
        can point into them yet, so they are only marked gone: a later
        request to one of them fails at once (``noproc``) instead of being
        sent to a socket nobody reads."""
        for proc, reason in gone:
            self.mark_gone(proc, reason)

    def learn_node(self, node_id: str, address: str, public: str | None, secret: str | None) -> None:
        """A host hears from its node process that node ``node_id`` is up at
        ``address``: frames for it may leave on a connection of this host's own."""
        if self.direct is None or node_id in self.dead_nodes:
            return
        self.direct.learn(node_id, address, public.encode() if public else None, secret.encode() if secret else None)
        self.heard_of(node_id)

    def node_down(self, node_id: str, reason: Any) -> None:
        """Another node is lost: every process of it that anything here
        points at is down with ``reason`` (``noconnection``), and later
        sends to any of them are dropped."""
        prefix = f"{node_id}|"
        procs = {w.proc for w in list(self.pending.values()) if isinstance(w.proc, str)}
        for cell in list(self.cells.values()):
            with cell.lock:
                procs.update(r.proc for r in cell.links.values())
                procs.update(r.proc for r in cell.monitors_in.values())
                procs.update(r.proc for r in cell.monitors_out.values())
        for sink in list(self.sinks.values()):
            target = getattr(sink, "target", None)
            if target is not None:
                procs.add(target.proc)
        procs.update(self.transport.peers.owners())
        self.dead_nodes[node_id] = reason
        if self.direct is not None:
            self.direct.forget(node_id)
        with self.fragments_lock:
            self.fragments.forget(node_id)
        fenced = len(self.unheard.take(node_id))
        if fenced:
            self.stats.increment("actors.net.fenced_frames", fenced)
        for proc in procs:
            if proc.startswith(prefix):
                self.proc_down(proc, reason)

    def end_incarnation(self, why: str, actors: bool) -> int:
        """This node's incarnation ended (``why``): no spawn here from now on.  With
        ``actors``, every actor of this process dies with `INCARNATION_ENDED` (no
        ``terminate``: what had to stop cleanly was stopped before) and calls from
        here fail with `actors._core.wire.reasons.IncarnationEnded`; how many actors died."""
        self.ended = why
        if not actors:
            return 0
        self.calls_refused = True
        cells = [cell for cell in list(self.cells.values()) if cell.alive]
        for cell in cells:
            cell.die(INCARNATION_ENDED)
        return len(cells)
