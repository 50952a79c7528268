"""Receiving: frames from the endpoint, decoded and handed on by kind.

What one read of the endpoint brought is gathered per actor first (casts,
sends and calls), so an actor sent a burst wakes once for the burst; every
other signal goes to the handler its kind is registered with
(`RuntimeBase.handle_kind`), in arrival order.  Garbage is dropped and
counted, never fatal.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from actors._core.runtime.context import thread_state
from actors._core.runtime.kinds import K_BATCH, K_CALL, K_CAST, K_INFO, K_REPLY, K_REPLY_EXIT, K_STOP, K_SYS
from actors._core.runtime.sending import Sending
from actors._core.transport.transport import Transport
from actors._core.wire.codec import FrameError, decode_frame, unwrap_relay, unwrap_remote
from actors._core.wire.plain import REFUSED, Refused
from actors._core.wire.ref import From

__all__ = ["Dispatch"]

log = logging.getLogger("actors.runtime")

#: The nodes a refused frame was logged for (`Dispatch.refuse`): once each, the count says the rest.
_refusals_logged: set[str] = set()


class _Mail:
    """What one read of an endpoint brought one actor: its mailbox entries
    in arrival order, and the calls among them (put in flight together)."""

    __slots__ = ("items", "calls")

    def __init__(self) -> None:
        self.items: list[tuple[int, Any, Any]] = []
        self.calls: list[From] = []


def _caller(src: str, ref: Any, frm: Any) -> From:
    """Where a call came from: ``frm`` is the calling actor's id, or
    ``[caller, reply channel, chain]`` (the chain of calls waiting above
    it, when an actor serving a call made it: `actors.CallCycle`)."""
    if type(frm) is list:
        chain = frm[2] if len(frm) > 2 and type(frm[2]) is list else None
        return From(src, ref, frm[0], frm[1], chain)
    return From(src, ref, frm)


class Dispatch(Sending):
    """Frames in, to mailboxes and to the handlers of their kinds."""

    #: How a pickled body from another node is built: None, `pickle.loads`
    #: (the cluster key is the trust boundary), or, with ``[cluster]
    #: trust_peers = false``, `actors._core.wire.plain.loads_plain`.
    peer_loads: Callable[[Any], Any] | None = None

    def __init__(self, node_id: str, transport: Transport, node_proc: str = "n") -> None:
        super().__init__(node_id, transport, node_proc)
        self.handle_kind(K_CALL, self._on_call)
        self.handle_kind(K_STOP, self._on_call)
        self.handle_kind(K_INFO, self._on_message)
        self.handle_kind(K_CAST, self._on_message)

    def handle_lent_frames(self, frames: list[bytes]) -> None:
        """Frames read by the actor the endpoint is lent to, on its thread: handled
        as the I/O thread would, not as that actor (whose casts are batched
        and who would be taken for a spawner's parent)."""
        state = thread_state
        cell, outbox = state.cell, state.outbox
        state.cell = state.outbox = None
        try:
            self.handle_frames(frames)
        except Exception:
            log.exception("frame handling failed")
        finally:
            state.cell, state.outbox = cell, outbox

    def handle_frames(self, frames: list[bytes]) -> None:
        batch: dict[Any, _Mail] = {}
        on_frame = self._on_frame
        for frame in frames:
            on_frame(frame, batch)
        if batch:
            self._flush_batch(batch)

    def _on_frame(self, frame: bytes, batch: dict[Any, _Mail]) -> None:
        if frame and frame[0] == 83:  # b"S": straight from a process of another node
            self._on_remote_frame(frame, batch)
            return
        try:
            kind, to, frm, ref, src, body = decode_frame(frame)
        except FrameError:  # garbage is dropped and counted, never fatal
            if self.relay is not None and frame[:1] == b"R":  # a host's frame for another node
                try:
                    dest, inner = unwrap_relay(frame)
                except FrameError:
                    self._count_garbage()
                    return
                self.relay(dest, inner)
                return
            self._count_garbage()
            return
        self._on_signal(kind, to, frm, ref, src, body, batch)

    def _on_signal(self, kind: int, to: Any, frm: Any, ref: Any, src: str, body: Any, batch: dict[Any, _Mail]) -> None:
        try:
            if kind == K_BATCH:
                if type(body) is not list or any(
                    type(i) is not list or len(i) != 3 or (i[0] != K_CAST and i[0] != K_INFO) for i in body
                ):
                    self._count_garbage()
                    return
                cells = self.cells
                for item_kind, item_to, item_body in body:
                    cell = cells.get(item_to)
                    if cell is not None and cell.limit is not None:
                        # A bounded mailbox takes (or drops) each at once:
                        # a drained burst is never held decoded in full.
                        if batch:
                            self._flush_batch(batch)
                        cell.enqueue(item_kind, item_body)
                    elif cell is not None:
                        mail = batch.get(cell)
                        if mail is None:
                            mail = batch[cell] = _Mail()
                        mail.items.append((item_kind, item_body, None))
                    else:
                        if batch:
                            self._flush_batch(batch)
                        self._deliver(item_kind, item_to, None, None, item_body, src)
                return
            if kind == K_CAST or kind == K_INFO or kind == K_CALL:
                cell = self.cells.get(to)
                if cell is not None:
                    # Gathered per actor, which wakes once per read: a server
                    # sent a burst of requests is woken once for the burst.
                    mail = batch.get(cell)
                    if mail is None:
                        mail = batch[cell] = _Mail()
                    if kind == K_CALL:
                        from_ = _caller(src, ref, frm)
                        mail.items.append((kind, body, from_))
                        mail.calls.append(from_)
                    else:
                        mail.items.append((kind, body, None))
                    return
            elif batch:
                self._flush_batch(batch)
            self._deliver(kind, to, frm, ref, body, src)
        except Exception:  # a well-formed frame with a body its kind cannot take
            self._count_garbage()
            log.exception("failed to deliver a frame of kind %s to %s", kind, to)

    def _on_remote_frame(self, data: bytes, batch: dict[Any, _Mail]) -> None:
        """A frame a process of another node sent straight here
        (`actors._core.net.direct`): dropped and counted when its node's
        incarnation was declared down here (fencing: a node cut off and
        declared down must restart to be heard again); held when this process
        has not been told that node is up yet (`actors._core.runtime.unheard`);
        else handled as one from this node, its names qualified with the node
        they came from."""
        try:
            origin, frame = unwrap_remote(data)
            if origin in self.dead_nodes:
                self.stats.increment("actors.net.fenced_frames")
                return
            direct = self.direct
            if direct is not None and not direct.knows(origin):
                if not self.unheard.hold(origin, data):
                    self.stats.increment("actors.net.unheard_dropped")
                return
            if frame[0] == 70:  # b"F": a fragment of a big frame (`actors._core.wire.fragments`)
                with self.fragments_lock:
                    whole = self.fragments.add(origin, frame)
                if whole is None:
                    return
                frame = whole
            loads = self.peer_loads
            kind, to, frm, ref, src, body = decode_frame(frame) if loads is None else decode_frame(frame, loads)
            if type(src) is not str:
                raise FrameError("no source process")
        except (FrameError, ValueError):
            self._count_garbage()
            return
        # Decoded once: the names are qualified here (as `requalify` does to
        # a frame the node process relays), not in a re-encoded frame.
        src = f"{origin}|{src}"
        if type(frm) is list and len(frm) >= 2 and type(frm[1]) is str:  # a call's [caller, reply channel, chain]
            frm = [frm[0], f"{origin}|{frm[1]}", *frm[2:]]
        if type(body) is Refused:
            self.refuse(origin, kind, to, frm, ref, src, body, batch)
            return
        self._on_signal(kind, to, frm, ref, src, body, batch)

    def refuse(
        self, origin: str, kind: int, to: Any, frm: Any, ref: Any, src: str, body: Refused, batch: dict[Any, _Mail]
    ) -> None:
        """A frame from another node whose pickled body names a class or
        function, received with ``[cluster] trust_peers = false``: its body
        is never built.  The frame is counted (``actors.net.refused_frames``)
        and logged once per node; a call or system request fails at once
        with ``("refused", what)`` instead of waiting out its timeout, and so
        does a call of this process whose answer was refused; anything else
        (a cast, a send, a signal) is dropped."""
        self.stats.increment("actors.net.refused_frames")
        if origin not in _refusals_logged:
            _refusals_logged.add(origin)
            log.warning(
                "refused a frame from node %s: its body names %s ([cluster] trust_peers = false)", origin, body.what
            )
        reason = (REFUSED, body.what)
        if kind == K_CALL or kind == K_STOP:
            self.reply_exit(_caller(src, ref, frm), reason)
        elif kind == K_REPLY or kind == K_REPLY_EXIT:
            self._on_signal(K_REPLY_EXIT, to, frm, ref, src, reason, batch)
        elif kind == K_SYS and ref is not None:
            self.route(src, K_REPLY_EXIT, None, None, ref, reason)

    def heard_of(self, origin: str) -> None:
        """Node ``origin`` is up here now: what it sent before, held, is handled first."""
        held = self.unheard.take(origin)
        if held:
            batch: dict[Any, _Mail] = {}
            for data in held:
                self._on_remote_frame(data, batch)
            if batch:
                self._flush_batch(batch)

    def _flush_batch(self, batch: dict[Any, _Mail]) -> None:
        for cell, mail in batch.items():
            for from_ in cell.enqueue_batch(mail.items, mail.calls):
                self.reply_exit(from_, "noproc")
        batch.clear()

    # -- the kinds that go to a mailbox -------------------------------------------

    def _on_call(self, kind: int, to: Any, frm: Any, ref: Any, body: Any, src: str) -> None:
        """K_CALL, K_STOP: into the actor's mailbox, or failed ``noproc``."""
        cell = self.cells.get(to)
        from_ = _caller(src, ref, frm)
        if cell is None or not cell.enqueue_call(kind, body, from_):
            self.reply_exit(from_, "noproc")

    def _on_message(self, kind: int, to: Any, frm: Any, ref: Any, body: Any, src: str) -> None:
        """K_INFO, K_CAST: into the actor's mailbox, or to a sink (a monitor
        or a receiver the host program holds); dropped when neither is here."""
        cell = self.cells.get(to)
        if cell is not None:
            cell.enqueue(kind, body)
        else:
            sink = self.sinks.get(to)
            if sink is not None:
                sink.on_message(kind, body)
