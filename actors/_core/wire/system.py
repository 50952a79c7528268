"""The system operations between processes' runtimes: one typed record each.

A process's runtime asks another's -- not an actor -- to do something: the
node tells a host that a process died, a host tells the node it is up, an
actor asks its node to spawn on another node.  Each operation is defined
here once, as a frozen record whose fields are its arguments, and both the
sender (`Runtime.sys_request` / `sys_send`) and the handler
(`Runtime.register_sys`) use that record, so the type checker holds both
ends to one definition.

On the wire an operation stays what it always was, ``(op, args)``: the
record's `OP` string and its fields as a tuple (`encode`); the receiver
rebuilds the record from them (`decode`).  ``R``, the record's type
parameter, is the type of what the operation answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from actors._core.wire.ref import ActorRef

__all__ = ["OPS", "SysOp", "decode", "encode"]

#: What an operation answers (covariant: an operation that answers a list
#: of names also answers an iterable of them).
R = TypeVar("R", covariant=True)


class SysOp(Generic[R]):
    """A system operation; ``R`` is the type of its answer."""

    __slots__ = ()
    #: The operation's name on the wire.
    OP: ClassVar[str]

    def args(self) -> tuple[Any, ...]:
        """The fields, in order: the operation's arguments on the wire."""
        names: tuple[str, ...] = self.__slots__  # a dataclass's slots: its fields, in order
        return tuple(getattr(self, name) for name in names)


# -- what every process answers ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Alive(SysOp[bool]):
    """Whether actor ``actor_id`` lives in the process asked."""

    OP: ClassVar[str] = "alive"
    actor_id: str


@dataclass(frozen=True, slots=True)
class ProcDown(SysOp[None]):
    """Process ``proc`` of the node died with ``reason`` (the node tells every other)."""

    OP: ClassVar[str] = "proc_down"
    proc: str
    reason: Any


@dataclass(frozen=True, slots=True)
class ProcsDown(SysOp[None]):
    """``[(proc, reason)]``: processes that died before the process told was up."""

    OP: ClassVar[str] = "procs_down"
    gone: Sequence[Sequence[Any]]


@dataclass(frozen=True, slots=True)
class NodeDown(SysOp[None]):
    """Another node is lost: every process of it is down with ``reason``."""

    OP: ClassVar[str] = "node_down"
    node_id: str
    reason: Any


@dataclass(frozen=True, slots=True)
class NetPeer(SysOp[None]):
    """Node ``node_id`` is up at ``address`` (with its curve keys): a host may open its own connection."""

    OP: ClassVar[str] = "net_peer"
    node_id: str
    address: str
    public: str | None
    secret: str | None


@dataclass(frozen=True, slots=True)
class Stats(SysOp[dict[str, Any]]):
    """The process's metrics."""

    OP: ClassVar[str] = "stats"


@dataclass(frozen=True, slots=True)
class Connect(SysOp[None]):
    """Connect ahead of time to these peers (the node's reply channels, for a new host)."""

    OP: ClassVar[str] = "connect"
    peers: Sequence[str]


@dataclass(frozen=True, slots=True)
class Info(SysOp[list[dict[str, Any]]]):
    """A snapshot of the actors of the process."""

    OP: ClassVar[str] = "info"


@dataclass(frozen=True, slots=True)
class AdoptName(SysOp[Any]):
    """Actor ``actor_id`` now holds ``name`` (answered ``"dead"`` when it is gone)."""

    OP: ClassVar[str] = "adopt_name"
    actor_id: str
    name: str


@dataclass(frozen=True, slots=True)
class DropName(SysOp[None]):
    """Actor ``actor_id`` no longer holds ``name``."""

    OP: ClassVar[str] = "drop_name"
    actor_id: str
    name: str


# -- what a host answers ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SpawnHere(SysOp[None]):
    """Start the actor in ``payload`` here and answer request ``orig_ref`` of ``orig_src``."""

    OP: ClassVar[str] = "spawn_here"
    orig_src: str
    orig_ref: int | None
    payload: bytes


@dataclass(frozen=True, slots=True)
class Halt(SysOp[None]):
    """End the host process."""

    OP: ClassVar[str] = "halt"


@dataclass(frozen=True, slots=True)
class EndIncarnation(SysOp[int]):
    """The node's incarnation ended (``why``): the process refuses spawns from now on;
    with ``actors``, every actor of it dies too and calls fail.  Answers how many died."""

    OP: ClassVar[str] = "end_incarnation"
    node_id: str
    why: str
    actors: bool


@dataclass(frozen=True, slots=True)
class Configure(SysOp[None]):
    """A warm spare's role, just before its first actor arrives."""

    OP: ClassVar[str] = "configure"
    own: bool
    cpus: Sequence[int] | None


@dataclass(frozen=True, slots=True)
class ApplyConfig(SysOp[None]):
    """A configuration change made on the node (``value`` None deletes the key)."""

    OP: ClassVar[str] = "apply_config"
    section: str
    key: str
    value: str | None


# -- what the node process answers ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Register(SysOp["ActorRef | None"]):
    """Register ``name`` for ``ref``; answers the holder when another actor has it."""

    OP: ClassVar[str] = "register"
    name: str
    ref: ActorRef


@dataclass(frozen=True, slots=True)
class Unregister(SysOp[bool]):
    """Unregister ``name`` (only when ``ref`` holds it, when given)."""

    OP: ClassVar[str] = "unregister"
    name: str
    ref: ActorRef | None


@dataclass(frozen=True, slots=True)
class Whereis(SysOp["ActorRef | None"]):
    """The holder of ``name`` on this node."""

    OP: ClassVar[str] = "whereis"
    name: str


@dataclass(frozen=True, slots=True)
class Spawn(SysOp[tuple[str, Any]]):
    """Spawn the actor in ``payload`` in a host process (``host``: ``"own"`` or a name)."""

    OP: ClassVar[str] = "spawn"
    host: str
    cpus: list[int] | None
    payload: bytes


@dataclass(frozen=True, slots=True)
class SpawnDone(SysOp[None]):
    """A host started the actor of spawn request ``orig_ref`` of ``orig_src``."""

    OP: ClassVar[str] = "spawn_done"
    orig_src: str
    orig_ref: int | None


@dataclass(frozen=True, slots=True)
class HostUp(SysOp[None]):
    """Host process ``proc`` (OS pid ``pid``) is up and serving."""

    OP: ClassVar[str] = "host_up"
    proc: str
    pid: int


@dataclass(frozen=True, slots=True)
class Halting(SysOp[None]):
    """Host process ``proc`` ends cleanly (its last actor is gone)."""

    OP: ClassVar[str] = "halting"
    proc: str


@dataclass(frozen=True, slots=True)
class ConfigSet(SysOp[None]):
    """Set (``value`` None: delete) a key of the node's configuration."""

    OP: ClassVar[str] = "config_set"
    section: str
    key: str
    value: str | None


@dataclass(frozen=True, slots=True)
class Hosts(SysOp[list[dict[str, Any]]]):
    """The node's host processes."""

    OP: ClassVar[str] = "hosts"


@dataclass(frozen=True, slots=True)
class Actors(SysOp[list[dict[str, Any]]]):
    """Every actor of the node."""

    OP: ClassVar[str] = "actors"


@dataclass(frozen=True, slots=True)
class NodeStats(SysOp[dict[str, Any]]):
    """The node's metrics, every process's together."""

    OP: ClassVar[str] = "node_stats"


@dataclass(frozen=True, slots=True)
class Registered(SysOp[dict[str, ActorRef]]):
    """The node's registered names."""

    OP: ClassVar[str] = "registered"


@dataclass(frozen=True, slots=True)
class ConfigGet(SysOp[dict[str, dict[str, str]]]):
    """The node's configuration, section by section (`ConfigSet` changes a key of it)."""

    OP: ClassVar[str] = "config"


@dataclass(frozen=True, slots=True)
class Kill(SysOp[None]):
    """Kill ``ref`` (untrappable, reason ``killed``)."""

    OP: ClassVar[str] = "kill"
    ref: ActorRef


@dataclass(frozen=True, slots=True)
class ExitActor(SysOp[None]):
    """Send ``ref`` an exit signal with ``reason``."""

    OP: ClassVar[str] = "exit"
    ref: ActorRef
    reason: Any


@dataclass(frozen=True, slots=True)
class RSpawn(SysOp[tuple[str, Any]]):
    """Another node's ``spawn(..., node=<this one>)``."""

    OP: ClassVar[str] = "rspawn"
    host: str | None
    cpus: Any
    payload: bytes


@dataclass(frozen=True, slots=True)
class SpawnOn(SysOp[tuple[str, Any]]):
    """An actor's ``spawn(..., node=...)``: on the first of ``candidates`` that is up."""

    OP: ClassVar[str] = "spawn_on"
    candidates: Sequence[str]
    host: str | None
    cpus: Any
    payload: bytes


@dataclass(frozen=True, slots=True)
class MonitorNode(SysOp[None]):
    """``("nodedown", name)`` to ``watcher`` when node ``name`` goes."""

    OP: ClassVar[str] = "monitor_node"
    name: str
    watcher: ActorRef


@dataclass(frozen=True, slots=True)
class Nodes(SysOp[list[str]]):
    """The other nodes the node is connected to."""

    OP: ClassVar[str] = "nodes"


@dataclass(frozen=True, slots=True)
class PeerList(SysOp[list[dict[str, Any]]]):
    """The connected nodes with address, incarnation and up-since time."""

    OP: ClassVar[str] = "peers"


@dataclass(frozen=True, slots=True)
class KnownNodes(SysOp[None]):
    """A connected node's list of its own peers."""

    OP: ClassVar[str] = "known_nodes"
    known: Any


@dataclass(frozen=True, slots=True)
class WhereisOn(SysOp["ActorRef | None"]):
    """The holder of ``name`` on node ``node`` (None when that node is not connected)."""

    OP: ClassVar[str] = "whereis_on"
    name: str
    node: str


@dataclass(frozen=True, slots=True)
class SendNamed(SysOp[None]):
    """``message`` for the actor registered as ``name`` on node ``node`` (None:
    the node that receives this), sent one way: Erlang's ``{Name, Node} ! Msg``.
    An actor sends it to its own node process, which alone knows the other
    nodes; that process forwards it to ``node``'s node process with ``node``
    None, which looks the name up and delivers.  No answer, no wait: a name
    nothing holds, or a node not connected, drops the message."""

    OP: ClassVar[str] = "send_named"
    name: str
    node: str | None
    message: Any


@dataclass(frozen=True, slots=True)
class MonitorNodes(SysOp[None]):
    """Subscribe (``flag`` False: unsubscribe) ``ref`` to nodeup/nodedown."""

    OP: ClassVar[str] = "monitor_nodes"
    ref: ActorRef
    flag: bool


@dataclass(frozen=True, slots=True)
class PeerProcDown(SysOp[None]):
    """Another node says one of its host processes died."""

    OP: ClassVar[str] = "peer_proc_down"
    proc: str
    reason: Any


# -- the cluster-wide names (`actors.global_names`) ------------------------------------


@dataclass(frozen=True, slots=True)
class GlobalWhereis(SysOp[Any]):
    """The holder of cluster-wide name ``name`` in this node's copy of the table:
    an `ActorRef`, None, or a marker string when no name server runs here."""

    OP: ClassVar[str] = "global_names.whereis"
    name: str


#: Every operation by its name on the wire.
OPS: dict[str, type[SysOp[Any]]] = {}
for _op in (
    Alive,
    ProcDown,
    ProcsDown,
    NodeDown,
    NetPeer,
    Stats,
    Connect,
    Info,
    AdoptName,
    DropName,
    SpawnHere,
    Halt,
    EndIncarnation,
    Configure,
    ApplyConfig,
    Register,
    Unregister,
    Whereis,
    Spawn,
    SpawnDone,
    HostUp,
    Halting,
    ConfigSet,
    Hosts,
    Actors,
    NodeStats,
    Registered,
    ConfigGet,
    Kill,
    ExitActor,
    RSpawn,
    SpawnOn,
    MonitorNode,
    Nodes,
    PeerList,
    KnownNodes,
    WhereisOn,
    SendNamed,
    MonitorNodes,
    PeerProcDown,
    GlobalWhereis,
):
    assert _op.OP not in OPS, f"two operations named {_op.OP!r}"
    OPS[_op.OP] = _op
del _op


def encode(msg: SysOp[Any]) -> tuple[str, tuple[Any, ...]]:
    """``(op, args)``: an operation as the body of a system frame."""
    return msg.OP, msg.args()


def decode(body: Any) -> SysOp[Any]:
    """The operation a system frame's body ``(op, args)`` carries; `KeyError`
    for an unknown op, `TypeError` for arguments that do not fit it."""
    op, args = body
    return OPS[op](*args)
