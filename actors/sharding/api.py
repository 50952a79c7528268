"""Starting a sharded type on a node, and addressing its entities by key.

`start` puts the type's tree under a supervisor in the node process:
the coordinator first, then the region (``rest_for_one``: a coordinator
that restarts is rebuilt from the regions' registrations; a region that
restarts registers again).  `ref` gives an `EntityRef`, whose `call`,
`cast` and `send` go through the calling node's region, from any thread of
any process of the node, or any actor.
"""

from __future__ import annotations

from typing import Any

from actors import ActorRef, Exit, whereis
from supervision import ChildSpec, Supervisor, SupFlags, start_supervisor

from .buffer import BufferFull
from .coordinator import Coordinator
from .names import coordinator_name, region_name, supervisor_name
from .placement import key_text
from .region import Region
from .settings import DEFAULT_IDLE, Settings

__all__ = ["EntityError", "EntityRef", "ref", "spec", "start", "status"]

_UNSET: Any = object()


class EntityError(Exit):
    """A call to an entity failed: its code raised (``entity_crashed``), its node was
    lost before it replied (``noconnection``), or its region stopped."""


def start(
    node: Any,
    type_name: str,
    cls: type | None = None,
    *,
    shards: int = 100,
    idle: float | None = DEFAULT_IDLE,
    max_active: int | None = None,
    proxy: bool = False,
    store: str | None = None,
    lease_ttl: float | None = None,
    buffer: int | None = None,
    rebalance_every: float | None = None,
    max_moves: int | None = None,
    remember: bool = False,
) -> ActorRef:
    """Start ``type_name``'s region on ``node`` (an `actors.Node`): it hosts entities of
    ``cls`` for the shards the cluster gives it, or none with ``proxy=True`` (it
    routes only).  Every node of the type must use the same ``shards``.  ``store``
    (or ``[sharding] store``) is a PostgreSQL URL: then a shard is served only
    under its lease there.  ``remember=True``: the entities active in a shard are
    started again, without a message, wherever the shard goes next (docs/sharding.md,
    *Remembered entities*).  Returns the type's supervisor."""
    if not isinstance(type_name, str) or not type_name or "." in type_name:
        raise ValueError(f"a sharded type's name is a non-empty string without dots, got {type_name!r}")
    settings = Settings.from_config(
        getattr(node, "config", None),
        shards=shards,
        idle=idle,
        max_active=max_active,
        store=store,
        lease_ttl=lease_ttl,
        buffer=buffer,
        rebalance_every=rebalance_every,
        max_moves=max_moves,
        remember=remember,
    )
    sup = start_supervisor(node, *_tree(type_name, cls, settings, proxy), name=supervisor_name(type_name))
    assert sup is not None
    return sup


def _tree(type_name: str, cls: Any, settings: Settings, proxy: bool) -> tuple[SupFlags, list[ChildSpec]]:
    children = [
        ChildSpec("coordinator", (Coordinator, (type_name, settings))),
        ChildSpec("region", (Region, (type_name, cls, settings, proxy)), shutdown=30.0),
    ]
    return SupFlags("rest_for_one", intensity=10, period=10), children


class TypeSup(Supervisor):
    """A sharded type's supervisor started from a `spec`."""

    def init(self, type_name: str, cls: Any, settings: Settings, proxy: bool) -> tuple[SupFlags, list[ChildSpec]]:
        return _tree(type_name, cls, settings, proxy)


def spec(type_name: str, cls: Any = None, *, proxy: bool = False, **options: Any) -> ChildSpec:
    """``type_name``'s tree as a child of a supervisor of the program's, on whatever node
    that supervisor (or the spec's ``node``) starts it: what `start` starts, with
    ``options`` as `start`'s keywords.  The settings are made here, from ``options``
    alone (no node's ``[sharding]`` section): say ``store=`` when there is one.  ``cls``
    is the entity's class, or any callable that builds an entity from its context."""
    if not isinstance(type_name, str) or not type_name or "." in type_name:
        raise ValueError(f"a sharded type's name is a non-empty string without dots, got {type_name!r}")
    settings = Settings.from_config(None, **options)
    return ChildSpec(
        supervisor_name(type_name),
        (TypeSup, (type_name, cls, settings, proxy)),
        type="supervisor",
        name=supervisor_name(type_name),
    )


def _region(type_name: str) -> ActorRef:
    region = whereis(region_name(type_name))
    if region is None:
        raise LookupError(
            f"sharding {type_name!r} has no region on this node: start one with actors.sharding.start(node, ...)"
        )
    return region


class EntityRef:
    """The entity of ``type_name`` for ``key``, wherever it runs (or will)."""

    __slots__ = ("key", "type_name")

    def __init__(self, type_name: str, key: str | int) -> None:
        key_text(key)  # a key must hash the same everywhere
        self.type_name = type_name
        self.key = key

    def __repr__(self) -> str:
        return f"<EntityRef {self.type_name}:{self.key!r}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EntityRef) and (self.type_name, self.key) == (other.type_name, other.key)

    def __hash__(self) -> int:
        return hash((self.type_name, self.key))

    def call(self, request: Any, timeout: float | None = 5.0) -> Any:
        """The entity's ``handle_call(request)``, started first if it is not active.
        Raises `BufferFull` when its shard is moving and its buffer is full,
        `EntityError` when the entity failed or its node was lost before replying,
        `actors.CallTimeout` after ``timeout`` seconds."""
        answer = _region(self.type_name).call(("deliver", self.key, request), timeout=timeout)
        if answer[0] == "ok":
            return answer[1]
        _, why, text = answer
        if why == "buffer_full":
            raise BufferFull(self.type_name, text, -1)
        raise EntityError(why, text)

    def cast(self, request: Any) -> None:
        """The entity's ``handle_cast(request)``; never fails (a message past a full
        buffer is dropped and counted, ``sharding_dropped_total``)."""
        _region(self.type_name).cast(("deliver", self.key, "cast", request))

    def send(self, message: Any) -> None:
        """The entity's ``handle_info(message)``, as `cast`."""
        _region(self.type_name).cast(("deliver", self.key, "info", message))


def ref(type_name: str, key: str | int) -> EntityRef:
    """The entity of ``type_name`` for ``key``: usable before it exists and across its moves."""
    return EntityRef(type_name, key)


def status(type_name: str, node: str | None = None, timeout: float = 5.0) -> dict[str, Any]:
    """This node's (or the connected ``node``'s) region of ``type_name``: its shards,
    active entities, buffered messages, leader; and, from the leader's coordinator,
    the table of shards per node (``"table"``, on the leader only)."""
    region = _region(type_name) if node is None else whereis(region_name(type_name), node=node, timeout=timeout)
    if region is None:
        raise LookupError(f"sharding {type_name!r} has no region on {node}")
    out: dict[str, Any] = region.call("status", timeout=timeout)
    coordinator = whereis(coordinator_name(type_name), node=node, timeout=timeout)
    if coordinator is not None:
        table = coordinator.call("table", timeout=timeout)
        if table["active"]:
            out["table"] = table
    return out
