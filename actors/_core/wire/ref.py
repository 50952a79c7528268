"""Actor references: the address of an actor, valid in every process of a node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["ActorRef", "From", "set_runtime_resolver"]

# Refs sit below the runtime in the kernel's layers, so they cannot import it:
# the runtime installs how a node id is resolved to this process's runtime.
_resolve: Callable[[str], Any] | None = None
_resolve_remote: Callable[[], Any] | None = None

#: Ids of the nodes whose runtime lives in this process (kept by `actors._core.runtime.runtime`).
#: A ref of a distributed node (an id ``name@incarnation``) that is not one of
#: them addresses another node: its ``proc`` is qualified ``<node_id>|<proc>``,
#: which the transport routes through the node process and the node's link.
local_node_ids: set[str] = set()

#: The tcp ports of processes of other nodes that listen for frames
#: themselves (qualified proc -> port): learned from the refs that arrive
#: here (a ref says where its process listens), so a frame for one of them
#: leaves on a connection straight to it (`actors._core.net.direct`).
remote_ports: dict[str, int] = {}


def set_runtime_resolver(resolve: Callable[[str], Any], resolve_remote: Callable[[], Any]) -> None:
    """Called once by `actors._core.runtime.runtime` when it is imported."""
    global _resolve, _resolve_remote
    _resolve = resolve
    _resolve_remote = resolve_remote


def qualify(node_id: str, proc: str) -> str:
    """The name a process of another node goes by in this one."""
    return f"{node_id}|{proc}"


class ActorRef:
    """The handle of one actor.

    A ref names the node, the OS process (``proc``) hosting the actor and the
    actor's id, which is unique across the node and never reused: a restarted
    actor gets a new ref.  Refs pickle to plain data and work from any
    process of the node.
    """

    __slots__ = ("node_id", "proc", "home_proc", "id", "os_pid", "name", "blocks", "port", "_hash")

    def __init__(
        self,
        node_id: str,
        proc: str,
        id: str,
        os_pid: int,
        name: str | None = None,
        blocks: bool = False,
        port: int = 0,
    ) -> None:
        self.node_id = node_id
        #: The process on the actor's own node; ``proc`` is where this process sends to.
        self.home_proc = proc
        if "@" in node_id and node_id not in local_node_ids:
            proc = qualify(node_id, proc)
            if port:
                remote_ports[proc] = port
        self.proc = proc
        self.id = id
        self.os_pid = os_pid
        self.name = name
        #: The actor's mailbox is bounded with ``overflow="block"``: a sender
        #: waits for room (see `actors._core.runtime.mailbox`).
        self.blocks = blocks
        #: The tcp port the actor's process reads frames from other nodes on
        #: (0: none; they go through its node process).
        self.port = port
        self._hash = hash((node_id, id))

    # -- identity ------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ActorRef):
            return NotImplemented
        return self.id == other.id and self.node_id == other.node_id

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<ActorRef {self.id}{label} pid={self.os_pid}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ActorRef, tuple(self.to_wire()))

    def to_wire(self) -> list[Any]:
        wire = [self.node_id, self.home_proc, self.id, self.os_pid, self.name]
        if self.port:
            wire += [self.blocks, self.port]
        elif self.blocks:
            wire.append(True)
        return wire

    @classmethod
    def from_wire(cls, data: list[Any]) -> "ActorRef":
        return cls(*data)

    # -- messaging -----------------------------------------------------------

    def call(self, request: Any, timeout: float | None = 5.0) -> Any:
        """Send ``request`` to ``handle_call`` and wait for the reply.

        Raises `actors.Exit` with the target's exit reason if it is dead
        (``noproc``) or dies before replying, `actors.CallTimeout` when no
        reply comes within ``timeout`` seconds (``None`` waits forever).
        """
        return _runtime_of(self).call(self, request, timeout)

    def cast(self, request: Any, timeout: float | None = 5.0) -> None:
        """Deliver ``request`` to ``handle_cast``; never fails.  It never
        waits either, except for room in a mailbox bounded with
        ``overflow="block"``: at most ``timeout`` seconds, after which the
        cast is dropped and counted."""
        _runtime_of(self).cast(self, request, timeout)

    def send(self, message: Any, timeout: float | None = 5.0) -> None:
        """Deliver ``message`` to ``handle_info``; never fails, and waits
        only as `cast` does, for room in a ``"block"`` mailbox."""
        _runtime_of(self).send(self, message, timeout)

    async def acall(self, request: Any, timeout: float | None = 5.0) -> Any:
        """`call` for asyncio programs: ``await ref.acall(request)``.

        The event loop keeps running while the call is pending and no thread
        is spent on it; failures and timeouts raise as `call` does.
        """
        return await _runtime_of(self).acall(self, request, timeout)

    async def acast(self, request: Any) -> None:
        """`cast` for asyncio programs (a cast never waits: this only saves
        the caller from mixing sync and async styles)."""
        _runtime_of(self).cast(self, request)

    def is_alive(self, timeout: float = 5.0) -> bool:
        """Ask the hosting process whether the actor still runs."""
        return _runtime_of(self).is_alive(self, timeout)


class From:
    """Where a call's reply goes: the caller's process and the call's ref, and
    the calling thread's reply channel when the caller is in another process."""

    __slots__ = ("proc", "ref", "caller", "channel", "chain")

    def __init__(
        self, proc: str, ref: int, caller: str | None, channel: str | None = None, chain: list[Any] | None = None
    ) -> None:
        self.proc = proc
        self.ref = ref
        self.caller = caller
        self.channel = channel
        #: The calls waiting on this one, oldest first: ``[node_id, proc, ref, label]``
        #: each (`actors.CallCycle`); None for a call no actor waits above.
        self.chain = chain

    def __eq__(self, other: object) -> bool:
        return isinstance(other, From) and (self.proc, self.ref) == (other.proc, other.ref)

    def __hash__(self) -> int:
        return hash((self.proc, self.ref))

    def __repr__(self) -> str:
        return f"<From {self.proc}:{self.ref}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return (From, (self.proc, self.ref, self.caller, self.channel, self.chain))


def _runtime_of(ref: ActorRef) -> Any:
    if _resolve is None or _resolve_remote is None:
        raise RuntimeError("no actors node is running in this process")
    if ref.proc is not ref.home_proc:  # an actor of another node: this process's runtime reaches it
        return _resolve_remote()
    return _resolve(ref.node_id)
