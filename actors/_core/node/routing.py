"""Frames between this node and the others: out through the link, in to the right process.

Out: a frame for a process of another node, from any thread of the node's
process or from one of its hosts, goes through the node-to-node link
(`NetLink`), unless that node, or that incarnation of it, is gone: then it
is dropped, and what waits on that process fails with ``noconnection``.
In: a frame from another node is delivered to its process here as a local
frame would be, in the order the link received them; one for a process of
this node that is gone is answered as a dead actor answers.  A host may
also reach other nodes on connections of its own (`actors._core.net.direct`):
the router tells it where they are.

Deaths cross the same way: a process of another node that is gone fails
whatever points at it here and in every host.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping

from actors._core.host.pool import HostPool
from actors._core.net.net import NetError, NetLink
from actors._core.node.peers import PeerNodes
from actors._core.runtime.runtime import K_REPLY, K_REPLY_EXIT, K_SYS, Runtime
from actors._core.transport.transport import owner_of
from actors._core.wire import system as sysop
from actors._core.wire.codec import FrameError, decode_frame, encode_frame, frame_kind, requalify
from actors._core.wire.plain import REFUSED, Refused
from actors._core.wire.ref import qualify

__all__ = ["Router"]


class Router:
    """The node's frames to and from other nodes (`net` is None until the node is distributed)."""

    def __init__(self, rt: Runtime, pool: HostPool, peers: PeerNodes, link_send_wait: float) -> None:
        self._rt = rt
        self._pool = pool
        self._peers = peers
        self._link_send_wait = link_send_wait
        self.net: NetLink | None = None
        self._here_lock = threading.Lock()
        self._here_queued = 0  # frames from other nodes waiting for the I/O thread (`_deliver_here`)

    def relay(self, dest: str, frame: bytes) -> None:
        """A frame for a process of another node (from any thread of this process, or a host's)."""
        node_id, _, proc = dest.partition("|")
        peer = node_id.rpartition("@")[0]
        net = self.net
        if net is None or self._peers.ids.get(peer) != node_id:
            # That node (or that incarnation of it) is gone: dropped, and
            # whatever waits on that process fails with noconnection.
            self._rt.call_soon(lambda: self.remote_proc_gone(owner_of(dest), "noconnection"))
            return
        direct = self._rt.direct
        if direct is not None and direct.send(node_id, proc, frame):
            return  # straight to that process, which listens itself
        try:
            # The I/O thread reads the endpoint hosts relay through: it must not wait for a slow link.
            net.send(peer, [proc.encode(), frame], threading.current_thread() is not self._rt.transport.io_thread)
        except NetError:
            pass  # lost meanwhile: on_down reports it

    def remote_proc_gone(self, proc: str, reason: Any) -> None:
        """A process of another node is gone: fail what points at it, here and in every host (I/O thread).

        Told again for a process already known gone here: a frame dropped in
        `relay` may come from a host that started after the loss and so
        does not know yet (its proc_down is idempotent)."""
        for host in list(self._pool.hosts.values()):
            if host.state == "up":
                self._rt.sys_send(host.proc, sysop.ProcDown(proc, reason))
        self._rt.proc_down(proc, reason)

    def on_peer_proc_down(self, src: str, msg: sysop.PeerProcDown) -> None:
        """Another node says one of its host processes died (its report of what local ones get)."""
        proc, reason = msg.proc, msg.reason
        node_id, bar, _ = src.partition("|")
        if bar and isinstance(proc, str) and "|" not in proc:
            gone = qualify(node_id, proc)
            net = self.net
            if net is None:
                self.remote_proc_gone(gone, reason)
                return
            # That host may have sent on a connection of its own: what it sent
            # before it died is delivered before its death is acted on.
            try:
                net.after_drain(lambda: self._rt.call_soon(lambda: self.remote_proc_gone(gone, reason)))
            except NetError:  # the link is closing: so is this node
                pass

    def on_frame(self, peer: str, frames: list[bytes]) -> None:
        """A frame from another node: delivered to its process here as a local frame."""
        inc = self.net.incarnation_of(peer) if self.net is not None else None
        if inc is None or len(frames) != 2:
            self._rt.stats.increment("actors.net.dropped_frames")
            return
        try:
            # A reply channel that listens itself says its port (``h1~r3:41234``):
            # through this path it is reached by name.
            dest = frames[0].decode().partition(":")[0]
            frame = requalify(frames[1], f"{peer}@{inc:x}")
        except (UnicodeDecodeError, FrameError):
            self._rt.stats.increment("actors.net.dropped_frames")
            return
        if not dest or "|" in dest:
            self._rt.stats.increment("actors.net.dropped_frames")
            return
        if self._rt.peer_loads is not None:
            checked = self._plain_only(f"{peer}@{inc:x}", frame)
            if checked is None:
                return
            frame = checked
        owner = owner_of(dest)
        if owner == self._rt.proc:
            if dest == owner:
                self._deliver_here(frame)
            else:
                self._rt.send_frame(dest, frame, self._link_send_wait)
            return
        host = self._pool.hosts.get(owner)
        if host is not None and host.state != "dead":
            self._rt.send_frame(dest, frame, self._link_send_wait)
            return
        # A process of this node that is gone (or never was): a signal to one
        # of its actors is answered as one to a dead actor is (a call fails
        # with noproc, a monitor gets DOWN noproc, a link an EXIT noproc);
        # anything else is dropped.
        if dest == owner:
            try:
                kind = decode_frame(frame)[0]
            except FrameError:
                return
            if kind not in (K_REPLY, K_REPLY_EXIT, K_SYS):
                self._rt.call_soon(lambda: self._rt.handle_frames([frame]))

    def _plain_only(self, origin: str, frame: bytes) -> bytes | None:
        """With ``[cluster] trust_peers = false``: ``frame`` if its body is plain
        data, built here once with `actors._core.wire.plain.loads_plain` before
        any process of this node unpickles it.  A body naming a class or
        function is refused (`Dispatch.refuse`: counted, logged, a call or
        system request fails with ``refused``) and None comes back; a refused
        answer goes on to whoever waits for it as a ``refused`` failure."""
        loads = self._rt.peer_loads
        try:
            kind, to, frm, ref, src, body = decode_frame(frame, loads) if loads is not None else decode_frame(frame)
        except FrameError:
            self._rt.stats.increment("actors.net.dropped_frames")
            return None
        if type(body) is not Refused:
            return frame
        if kind == K_REPLY or kind == K_REPLY_EXIT:
            self._rt.stats.increment("actors.net.refused_frames")
            return encode_frame(K_REPLY_EXIT, to, frm, ref, src, (REFUSED, body.what))
        self._rt.refuse(origin, kind, to, frm, ref, src, body, {})
        return None

    def _deliver_here(self, frame: bytes) -> None:
        """A frame from another node for this process (link thread): delivered
        in place, as a thread of this process delivers to its actors, with no
        hand-off to the I/O thread.  A system request runs on the I/O thread,
        as every system handler here does; while one waits there, later
        frames queue behind it, so none overtakes it."""
        with self._here_lock:
            queue = self._here_queued > 0 or frame_kind(frame) == K_SYS
            if queue:
                self._here_queued += 1
        if not queue:
            self._rt.handle_frames([frame])
            return

        def run() -> None:
            try:
                self._rt.handle_frames([frame])
            finally:
                with self._here_lock:
                    self._here_queued -= 1

        self._rt.call_soon(run)

    def tell_net_peers(self, proc: str, peers: Mapping[str, str]) -> None:
        """Let host ``proc`` send to these nodes (name -> node id) on
        connections of its own (`actors._core.net.direct`), not through this process."""
        net = self.net
        if net is None:
            return
        key = net.key
        for peer, node_id in peers.items():
            address = net.address_of(peer)
            if address is not None:
                self._rt.sys_send(
                    proc,
                    sysop.NetPeer(
                        node_id, address, key.public.decode() if key else None, key.secret.decode() if key else None
                    ),
                )
