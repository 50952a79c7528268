"""Process-level functions: usable from any process of a node, actor or not.

Inside a host process there is no `Node` handle; these reach the runtime of
the calling process (the actor's, or the only one), so library code such as a
service facade can find and call actors wherever it runs.
"""

from __future__ import annotations

from typing import Any

from actors._core.runtime.monitor import Monitor
from actors._core.runtime.runtime import current_cell, current_runtime
from actors._core.wire import system as sysop
from actors._core.wire.reasons import Exit, NotRegistered
from actors._core.wire.ref import ActorRef

__all__ = ["call", "cast", "monitor", "node_id", "self_ref", "send", "whereis"]


def self_ref() -> ActorRef | None:
    """The ref of the actor whose callback is running on this thread
    (Erlang's ``self()``), or None on a thread that runs no actor's.

    Actors share worker threads, so a thread's identity no longer stands for
    an actor's: library code that keeps something per caller (a
    subscription, a lease) keys it by this, falling back to the thread
    outside actors."""
    cell = current_cell()
    return cell.ref if cell is not None else None


def node_id() -> str:
    """The id of the node the calling process belongs to (``"a@<incarnation>"``
    on a distributed node named a): what a service tags its state with, from
    an actor, a thread of a host process or the host program alike."""
    return current_runtime().node_id


def whereis(name: str, node: str | None = None, timeout: float | None = 5.0) -> ActorRef | None:
    """The actor registered under ``name`` anywhere in this node, or None.

    Names are local to a node (as Erlang's ``whereis``): ``node="b"`` asks
    the connected node b instead, through this node's process, and gives
    None when b is not connected or has nothing by that name."""
    runtime = current_runtime()
    if node is None:
        return runtime.whereis(name)
    return runtime.sys_request(runtime.node_proc, sysop.WhereisOn(name, node), timeout=timeout)


def _resolve(target: ActorRef | str) -> ActorRef | None:
    return whereis(target) if isinstance(target, str) else target


def call(target: ActorRef | str, request: Any, timeout: float | None = 5.0) -> Any:
    """`ActorRef.call` on a ref or a registered name (unknown name: ``noproc``)."""
    ref = _resolve(target)
    if ref is None:
        raise Exit("noproc", f"no actor is registered as {target!r}")
    return ref.call(request, timeout=timeout)


def cast(target: ActorRef | str, request: Any) -> None:
    ref = _resolve(target)
    if ref is not None:
        ref.cast(request)


def send(target: ActorRef | str | tuple[str, str], message: Any) -> None:
    """`ActorRef.send` on a ref or a registered name; a name nothing is
    registered under raises `Exit` ``noproc`` (a ``ValueError`` too: Erlang's
    ``Name ! Msg`` fails with ``badarg``).  A cast to such a name is dropped.

    ``(name, node)`` is the actor registered as ``name`` on the connected
    node ``node`` (Erlang's ``{Name, Node} ! Msg``): the message goes to this
    node's process, which hands it to ``node``'s, which looks the name up
    there.  Nothing is asked or waited for, so an actor's callback may send
    this way without blocking; an unknown name or a node that is not
    connected drops the message."""
    if isinstance(target, tuple):
        _send_named(*target, message)
        return
    ref = _resolve(target)
    if ref is None:
        raise NotRegistered(target)
    ref.send(message)


def _send_named(name: str, node: str, message: Any) -> None:
    """``send((name, node), message)``: one way, through this node's process (see `send`)."""
    if not isinstance(name, str) or not isinstance(node, str):
        raise TypeError(f"send to (name, node) takes two strings, got ({name!r}, {node!r})")
    runtime = current_runtime()
    runtime.sys_send(runtime.node_proc, sysop.SendNamed(name, node, message))


def monitor(target: ActorRef) -> Monitor:
    """A monitor waited on by the calling thread: ``.wait(timeout)`` -> (ref, reason)."""
    return Monitor(current_runtime(), target)
