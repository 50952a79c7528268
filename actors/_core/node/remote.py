"""What one node asks of another: spawn there, look a name up there, list its nodes.

Each request goes to the other node's node process (``n`` of that node id) as
a system request, and a node answers the same requests from the others: a
spawn from another node is placed here as a local spawn is.  The requests
an actor makes through its own node process (``spawn(..., node=...)``,
``whereis(name, node=...)``, ``send((name, node), ...)``, ``monitor_node``) are answered here too, since
only the node process knows which nodes are connected.
"""

from __future__ import annotations

from typing import Any

import cloudpickle

from actors._core.cell.spawn import AlreadyRegistered, SpawnError, spawn
from actors._core.node.peers import PeerNodes
from actors._core.runtime.mailbox import MailboxLimit
from actors._core.runtime.runtime import Runtime
from actors._core.wire import system as sysop
from actors._core.wire.plain import REFUSED
from actors._core.wire.reasons import INCARNATION_ENDED, Exit, IncarnationEnded
from actors._core.wire.ref import ActorRef, qualify

__all__ = ["Remote"]


class Remote:
    """Requests between node ``name`` (whose runtime is ``rt``) and the nodes connected to it."""

    def __init__(self, rt: Runtime, peers: PeerNodes, name: str | None) -> None:
        self._rt = rt
        self._peers = peers
        self.name = name

    def serve(self) -> None:
        """Answer other nodes' requests, and this node's actors' requests about other nodes."""
        rt = self._rt
        rt.register_sys(sysop.RSpawn, self._on_rspawn, threaded=True)
        rt.register_sys(sysop.SpawnOn, self._on_spawn_on, threaded=True)
        rt.register_sys(sysop.MonitorNode, self._on_monitor_node)
        rt.register_sys(sysop.WhereisOn, self._on_whereis_on, threaded=True)
        rt.register_sys(sysop.SendNamed, self._on_send_named)

    def node_proc_of(self, node: str) -> str:
        """The node process of the connected ``node``; `Exit` ``noconnection`` when it is not."""
        node_id = self._peers.ids.get(node)
        if node_id is None:
            raise Exit("noconnection", f"node {node!r} is not connected")
        return qualify(node_id, self._rt.node_proc)

    def whereis(self, name: str, node: str | None, timeout: float | None = 5.0) -> ActorRef | None:
        """The actor registered as ``name`` on ``node`` (this one when None, or a connected one)."""
        if node is not None and node != self.name:
            return self._rt.sys_request(self.node_proc_of(node), sysop.Whereis(name), timeout=timeout)
        return self._rt.registry.whereis(name)

    def nodes_of(self, node: str, timeout: float | None) -> list[str]:
        """The nodes the connected ``node`` is connected to."""
        return sorted(self._rt.sys_request(self.node_proc_of(node), sysop.Nodes(), timeout=timeout))

    def spawn(
        self,
        node: str,
        cls: type,
        args: tuple[Any, ...],
        kwargs: dict[str, Any] | None,
        name: str | None,
        host: str | None,
        cpus: Any,
        mailbox: MailboxLimit | None,
        timeout: float | None,
        own_thread: bool = False,
    ) -> ActorRef | None:
        """`Node.spawn` on the connected ``node``: the ref, None when ``init`` returned
        `actors.ignore`, else the start's failure raised here as a local one would be."""
        payload = cloudpickle.dumps((cls, tuple(args), dict(kwargs or {}), name, None, False, mailbox, own_thread))
        kind, detail = self.spawn_on([node], host, cpus, payload, timeout)
        if kind == "ok":
            return detail
        if kind == "ignore":
            return None
        if kind == "already_registered":
            raise AlreadyRegistered(("already_started", detail), f"name {name!r} is taken on {node}")
        raise SpawnError(detail, f"{getattr(cls, '__name__', cls)} failed to start on {node}")

    def spawn_on(
        self, candidates: list[str], host: str | None, cpus: Any, payload: bytes, timeout: float | None
    ) -> tuple[str, Any]:
        """Spawn on the first of ``candidates`` that is up (this node included)."""
        for candidate in candidates:
            if candidate == self.name:
                return self._on_rspawn(self._rt.proc, sysop.RSpawn(host, cpus, payload))
            node_id = self._peers.ids.get(candidate)
            if node_id is not None:
                cpu_list = sorted(cpus) if isinstance(cpus, (set, frozenset, list, tuple)) else cpus
                try:
                    answer = self._rt.sys_request(
                        qualify(node_id, self._rt.node_proc), sysop.RSpawn(host, cpu_list, payload), timeout=timeout
                    )
                except Exit as exc:
                    if exc.reason != "noconnection":
                        raise
                    continue  # lost meanwhile: the next candidate
                if answer != ("error", INCARNATION_ENDED):
                    return answer
                # That node is ending its incarnation (its link is going down): the next candidate.
        raise Exit("noconnection", f"none of the nodes {candidates} is connected")

    def _on_spawn_on(self, src: str, msg: sysop.SpawnOn) -> tuple[str, Any]:
        """An actor's ``spawn(..., node=...)``, from this node's processes."""
        candidates, host, cpus, payload = list(msg.candidates), msg.host, msg.cpus, msg.payload
        try:
            return self.spawn_on(candidates, host, cpus, payload, None)
        except Exit as exc:
            return ("error", exc.reason)

    def _on_rspawn(self, src: str, msg: sysop.RSpawn) -> tuple[str, Any]:
        """Another node's ``spawn(..., node=<this one>)``: placed here as a local spawn is."""
        if "|" in src and self._rt.peer_loads is not None:
            # A spawn carries code (the class, pickled): not run for another node
            # when ``[cluster] trust_peers = false``.
            return ("error", (REFUSED, "a spawn from another node"))
        host, cpus, payload = msg.host, msg.cpus, msg.payload
        cls, args, kwargs, name, parent, link, *more = cloudpickle.loads(payload)
        try:
            ref = spawn(
                self._rt,
                cls,
                args,
                kwargs,
                name=name,
                host=host,
                cpus=cpus,
                link=link,
                parent=parent,
                mailbox=more[0] if more else None,
                thread="own" if len(more) > 1 and more[1] else None,
            )
        except AlreadyRegistered as exc:
            return ("already_registered", exc.holder)
        except IncarnationEnded as exc:
            return ("error", exc.reason)
        except SpawnError as exc:
            return ("error", exc.reason)
        except (TypeError, ValueError) as exc:
            return ("error", ("badarg", str(exc)))
        return ("ignore", None) if ref is None else ("ok", ref)

    def _on_monitor_node(self, src: str, msg: sysop.MonitorNode) -> None:
        """An actor's ``monitor_node``: ``("nodedown", name)`` goes to its ``handle_info``."""
        name, watcher = msg.name, msg.watcher
        self._peers.watch(name, lambda: self._rt.send(watcher, ("nodedown", name)))

    def _on_send_named(self, src: str, msg: sysop.SendNamed) -> None:
        """A send to ``(name, node)``: delivered here when ``node`` is this one
        (or None: forwarded by another node), else handed on to that node's
        node process, which looks the name up itself.  Nothing waits for an
        answer, so the sender never blocks on another node; a name nobody
        holds, or a node that is not connected, drops the message, as
        Erlang's ``{Name, Node} ! Msg`` does."""
        if msg.node is None or msg.node == self.name or "|" in src:
            # Another node's process forwards nothing through this one: only this node's names.
            ref = self._rt.registry.whereis(msg.name)
            if ref is not None:
                self._rt.send(ref, msg.message)
            return
        node_id = self._peers.ids.get(msg.node)
        if node_id is not None:
            self._rt.sys_send(qualify(node_id, self._rt.node_proc), sysop.SendNamed(msg.name, None, msg.message))

    def _on_whereis_on(self, src: str, msg: sysop.WhereisOn) -> ActorRef | None:
        """An actor's ``whereis(name, node=...)``: None when that node is not connected."""
        name, node = msg.name, msg.node
        try:
            return self.whereis(name, node)
        except Exit as exc:
            if exc.reason == "noconnection":
                return None
            raise
