"""Child specifications and supervisor flags: frozen, validated values.

A supervisor's ``init`` returns data, as in OTP: ``SupFlags`` and a list of
``ChildSpec``.  Both carry OTP's defaults and are checked when built, so a
bad tree fails where it is written, with an error naming the field and the
value, rather than when a child first dies.  Times are seconds (OTP's
``shutdown`` is milliseconds; ``period`` is seconds in both).

Checks that need both the flags and the specs (``significant`` children
require an ``auto_shutdown`` other than ``never``; unique ids;
simple_one_for_one takes exactly one spec) live in ``check_startspec``,
as in OTP's ``check_startspec/2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Hashable, Iterable, Literal, Mapping, cast

from actors.global_names import GlobalName
from supervision.errors import InvalidChildSpec, InvalidSupFlags

__all__ = [
    "RESTART_TYPES",
    "CHILD_TYPES",
    "STRATEGIES",
    "AUTO_SHUTDOWN_MODES",
    "ChildSpec",
    "SupFlags",
    "check_childspecs",
    "check_startspec",
]

RestartType = Literal["permanent", "transient", "temporary"]
ChildType = Literal["worker", "supervisor"]
Strategy = Literal["one_for_one", "one_for_all", "rest_for_one", "simple_one_for_one"]
AutoShutdown = Literal["never", "any_significant", "all_significant"]
Shutdown = float | int | Literal["brutal_kill", "infinity"]

RESTART_TYPES: tuple[str, ...] = ("permanent", "transient", "temporary")
CHILD_TYPES: tuple[str, ...] = ("worker", "supervisor")
#: What a message that finds a bounded mailbox full gets (as `actors.Node.spawn`).
OVERFLOW_POLICIES: tuple[str, ...] = ("drop_newest", "drop_oldest", "reject", "block")
STRATEGIES: tuple[str, ...] = ("one_for_one", "one_for_all", "rest_for_one", "simple_one_for_one")
AUTO_SHUTDOWN_MODES: tuple[str, ...] = ("never", "any_significant", "all_significant")

WORKER_SHUTDOWN = 5.0
"""OTP's default worker shutdown (5000 ms), in seconds."""


class _Default:
    """Marks "shutdown not given": the default depends on ``type``."""

    def __repr__(self) -> str:
        return "<default>"


_DEFAULT_SHUTDOWN: Any = _Default()


def _is_real_number(value: object) -> bool:
    """int or float but not bool (``True`` is an int in Python, never a time here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _one_of(value: object, allowed: tuple[str, ...]) -> bool:
    return isinstance(value, str) and value in allowed


def _one_of_text(allowed: tuple[str, ...]) -> str:
    return "is not one of " + ", ".join(allowed)


@dataclass(frozen=True, eq=True)
class ChildSpec:
    """How a supervisor starts, restarts and stops one child (OTP ``child_spec()``).

    ``start`` is ``(cls, args)`` or ``(cls, args, kwargs)``: the actor class
    to spawn and its arguments (``args`` a tuple, a list is converted).
    ``shutdown`` is seconds (>= 0, as OTP allows 0), ``"brutal_kill"`` or
    ``"infinity"``; left out it is 5.0 for a worker and ``"infinity"`` for a
    supervisor, so a subtree always gets time to stop its own children.
    ``mailbox`` and ``overflow`` bound the child's mailbox as ``Node.spawn``
    does (unbounded when left out); ``thread="own"`` runs it on a thread of
    its own rather than on its process's scheduler.  ``node`` starts the child on another node: a name, or candidates of
    which the first one up when the child (re)starts is used, so a child
    whose node was lost (exit ``noconnection``) restarts on a survivor.
    ``host`` and ``cpus`` place the child as ``Node.spawn`` does; ``cpus`` is
    normalised to a frozenset.  ``name`` registers the child under that name
    each time it is started (OTP's ``start_link({local, Name}, ...)``);
    ``name=GlobalName("x")`` registers it cluster-wide before its ``init``
    runs (``{global, Name}``, `actors.global_names`), which with ``node``
    candidates makes a singleton that fails over.  ``significant`` marks a child whose exit may
    shut the supervisor down (see ``SupFlags.auto_shutdown``); it must not
    be permanent.  ``modules`` is OTP's key of that name: a list of module
    or class names (or classes), or ``"dynamic"``; left out, ``which_children``
    shows ``[<start class name>]``.

    Specs hash by ``id`` only, because ``args`` may hold unhashable values.
    """

    id: Hashable
    start: tuple[Any, ...]
    restart: RestartType = "permanent"
    shutdown: Shutdown = _DEFAULT_SHUTDOWN
    type: ChildType = "worker"
    host: str | None = None
    cpus: frozenset[int] | None = None
    significant: bool = False
    name: str | GlobalName | None = None
    node: str | tuple[str, ...] | None = None
    modules: tuple[Any, ...] | Literal["dynamic"] | None = None
    mailbox: int | None = None
    overflow: str | None = None
    thread: str | None = None

    def __post_init__(self) -> None:
        self._check_id()
        if self.thread is not None and not _one_of(self.thread, ("pool", "own")):
            raise InvalidChildSpec("thread", self.thread, "is neither None, 'pool' nor 'own'")
        if self.mailbox is not None and (type(self.mailbox) is not int or self.mailbox < 1):
            raise InvalidChildSpec("mailbox", self.mailbox, "is neither None nor a positive int")
        if self.overflow is not None:
            if self.mailbox is None:
                raise InvalidChildSpec(
                    "overflow", self.overflow, "needs mailbox=N (an unbounded mailbox never overflows)"
                )
            if not _one_of(self.overflow, OVERFLOW_POLICIES):
                raise InvalidChildSpec("overflow", self.overflow, _one_of_text(OVERFLOW_POLICIES))
        object.__setattr__(self, "modules", self._checked_modules(self.modules))
        if self.node is not None:
            nodes = (self.node,) if isinstance(self.node, str) else self.node
            if not isinstance(nodes, (tuple, list)) or not nodes or not all(isinstance(n, str) and n for n in nodes):
                raise InvalidChildSpec("node", self.node, "is neither None, a node name nor a list of them")
            object.__setattr__(self, "node", self.node if isinstance(self.node, str) else tuple(nodes))
        if self.name is not None and not isinstance(self.name, (str, GlobalName)):
            raise InvalidChildSpec("name", self.name, "is neither None, a string nor a GlobalName")
        if isinstance(self.name, GlobalName) and (not isinstance(self.name.name, str) or not self.name.name):
            raise InvalidChildSpec("name", self.name, "is a GlobalName without a non-empty string")
        object.__setattr__(self, "start", self._checked_start(self.start))
        if not _one_of(self.restart, RESTART_TYPES):
            raise InvalidChildSpec("restart", self.restart, _one_of_text(RESTART_TYPES))
        if not _one_of(self.type, CHILD_TYPES):
            raise InvalidChildSpec("type", self.type, _one_of_text(CHILD_TYPES))
        object.__setattr__(self, "shutdown", self._checked_shutdown(self.shutdown))
        if self.host is not None and not isinstance(self.host, str):
            raise InvalidChildSpec("host", self.host, "is neither None nor a string")
        object.__setattr__(self, "cpus", self._checked_cpus(self.cpus))
        if not isinstance(self.significant, bool):
            raise InvalidChildSpec("significant", self.significant, "is not a bool")
        if self.significant and self.restart == "permanent":
            raise InvalidChildSpec(
                "significant",
                self.significant,
                "is not allowed with restart 'permanent' (OTP bad_combination)",
            )

    def __hash__(self) -> int:
        return hash(self.id)

    def _check_id(self) -> None:
        if self.id is None:
            raise InvalidChildSpec("id", self.id, "must not be None")
        try:
            hash(self.id)
        except TypeError:
            raise InvalidChildSpec("id", self.id, "is not hashable") from None

    @staticmethod
    def _checked_modules(modules: Any) -> tuple[Any, ...] | str | None:
        if modules is None or (isinstance(modules, str) and modules == "dynamic"):
            return modules
        if isinstance(modules, (tuple, list)) and all(
            (isinstance(m, str) and m) or isinstance(m, type) for m in modules
        ):
            return tuple(modules)
        raise InvalidChildSpec("modules", modules, "is neither None, 'dynamic' nor a list of module or class names")

    @property
    def module_names(self) -> list[str] | str:
        """What ``which_children`` shows: the names in ``modules`` (or ``'dynamic'``)
        if given, else ``[<start class name>]``, as OTP defaults ``modules`` to
        ``[M]``, M the module of the start function."""
        if self.modules is None:
            return [getattr(self.start_class, "__name__", repr(self.start_class))]
        if isinstance(self.modules, str):
            return self.modules
        return [m if isinstance(m, str) else m.__name__ for m in self.modules]

    @staticmethod
    def _checked_start(start: Any) -> tuple[Any, ...]:
        if not isinstance(start, (tuple, list)) or len(start) not in (2, 3):
            raise InvalidChildSpec("start", start, "is not (cls, args) or (cls, args, kwargs)")
        cls, args = start[0], start[1]
        if not callable(cls):
            raise InvalidChildSpec("start", start, "does not begin with a class or callable")
        if not isinstance(args, (tuple, list)):
            raise InvalidChildSpec("start", start, "has args that are not a tuple or list")
        if len(start) == 2:
            return (cls, tuple(args))
        kwargs = start[2]
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise InvalidChildSpec("start", start, "has kwargs that are not a str-keyed mapping")
        return (cls, tuple(args), dict(kwargs))

    def _checked_shutdown(self, shutdown: Any) -> Shutdown:
        if shutdown is _DEFAULT_SHUTDOWN:
            return "infinity" if self.type == "supervisor" else WORKER_SHUTDOWN
        if isinstance(shutdown, str) and shutdown in ("brutal_kill", "infinity"):
            return cast(Shutdown, shutdown)
        if _is_real_number(shutdown) and math.isfinite(shutdown) and shutdown >= 0:
            return shutdown
        raise InvalidChildSpec("shutdown", shutdown, "is not seconds >= 0, 'brutal_kill' or 'infinity'")

    @staticmethod
    def _checked_cpus(cpus: Any) -> frozenset[int] | None:
        if cpus is None:
            return None
        if isinstance(cpus, (str, bytes, Mapping)) or not isinstance(cpus, Iterable):
            raise InvalidChildSpec("cpus", cpus, "is not None or a set of CPU numbers")
        try:
            cores = frozenset(cpus)
        except TypeError:
            raise InvalidChildSpec("cpus", cpus, "contains unhashable values") from None
        if not cores:
            raise InvalidChildSpec("cpus", cpus, "is empty")
        for core in cores:
            if not isinstance(core, int) or isinstance(core, bool) or core < 0:
                raise InvalidChildSpec("cpus", cpus, f"contains {core!r}, not a CPU number >= 0")
        return cores

    @property
    def start_class(self) -> Any:
        """The class (or callable) to spawn."""
        return self.start[0]

    @property
    def start_args(self) -> tuple[Any, ...]:
        """Positional arguments for ``start_class``."""
        return self.start[1]

    @property
    def start_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``start_class`` (a fresh dict; empty when none)."""
        return dict(self.start[2]) if len(self.start) == 3 else {}

    def with_args(self, extra: tuple[Any, ...]) -> "ChildSpec":
        """The spec with ``extra`` appended to ``args``.

        simple_one_for_one's ``start_child`` appends its arguments to the
        template's, as OTP appends ``ExtraArgs`` to the MFA's ``A``.
        """
        if not isinstance(extra, (tuple, list)):
            raise InvalidChildSpec("start", extra, "extra args are not a tuple or list")
        start = (self.start_class, self.start_args + tuple(extra), *self.start[2:])
        return _replace(self, start=start)

    def to_map(self) -> dict[str, Any]:
        """The spec as an OTP-style map (what ``get_childspec`` returns)."""
        return {
            "id": self.id,
            "start": self.start,
            "restart": self.restart,
            "shutdown": self.shutdown,
            "type": self.type,
            "host": self.host,
            "cpus": self.cpus,
            "significant": self.significant,
            "name": self.name,
            "node": self.node,
            "modules": self.modules,
            "mailbox": self.mailbox,
            "overflow": self.overflow,
            "thread": self.thread,
        }

    @classmethod
    def from_map(cls, spec: "ChildSpec | Mapping[str, Any] | tuple[Any, ...]") -> "ChildSpec":
        """Build a spec from an OTP-style map, an old-style tuple, or a spec.

        The map takes the field names as keys; ``id`` and ``start`` are
        required, the rest default as in the constructor.  The tuple is
        OTP's old format ``(id, start, restart, shutdown, type, modules)``,
        or the same without ``modules``.
        """
        if isinstance(spec, ChildSpec):
            return spec
        if isinstance(spec, Mapping):
            unknown = sorted(set(spec) - _CHILD_SPEC_KEYS, key=repr)
            if unknown:
                raise InvalidChildSpec("key", unknown[0], "is not one of " + ", ".join(sorted(_CHILD_SPEC_KEYS)))
            for required in ("id", "start"):
                if required not in spec:
                    raise InvalidChildSpec(required, spec, f"is missing (OTP missing_{required})")
            return cls(**spec)
        if isinstance(spec, tuple) and len(spec) in (5, 6):
            child_id, start, restart, shutdown, child_type = spec[:5]
            modules = spec[5] if len(spec) == 6 else None
            return cls(id=child_id, start=start, restart=restart, shutdown=shutdown, type=child_type, modules=modules)
        raise InvalidChildSpec("spec", spec, "is not a ChildSpec, a mapping or a 5- or 6-tuple")


_CHILD_SPEC_KEYS = frozenset(
    (
        "id",
        "start",
        "restart",
        "shutdown",
        "type",
        "host",
        "cpus",
        "significant",
        "name",
        "node",
        "modules",
        "mailbox",
        "overflow",
        "thread",
    )
)


def _replace(spec: ChildSpec, **changes: Any) -> ChildSpec:
    fields = spec.to_map()
    fields.update(changes)
    return ChildSpec(**fields)


@dataclass(frozen=True)
class SupFlags:
    """Supervisor flags (OTP ``sup_flags()``), with OTP's defaults.

    More than ``intensity`` restarts within ``period`` seconds make the
    supervisor stop its children and exit with ``shutdown``.  ``period`` may
    be fractional here (OTP counts whole seconds).  ``auto_shutdown`` says
    whether the exit of significant children shuts the supervisor down.
    """

    strategy: Strategy = "one_for_one"
    intensity: int = 1
    period: float | int = 5
    auto_shutdown: AutoShutdown = "never"

    def __post_init__(self) -> None:
        if not _one_of(self.strategy, STRATEGIES):
            raise InvalidSupFlags("strategy", self.strategy, _one_of_text(STRATEGIES))
        if not isinstance(self.intensity, int) or isinstance(self.intensity, bool) or self.intensity < 0:
            raise InvalidSupFlags("intensity", self.intensity, "is not an integer >= 0")
        if not _is_real_number(self.period) or not math.isfinite(self.period) or self.period <= 0:
            raise InvalidSupFlags("period", self.period, "is not a number of seconds > 0")
        if not _one_of(self.auto_shutdown, AUTO_SHUTDOWN_MODES):
            raise InvalidSupFlags("auto_shutdown", self.auto_shutdown, _one_of_text(AUTO_SHUTDOWN_MODES))

    def to_map(self) -> dict[str, Any]:
        """The flags as an OTP-style map."""
        return {
            "strategy": self.strategy,
            "intensity": self.intensity,
            "period": self.period,
            "auto_shutdown": self.auto_shutdown,
        }

    @classmethod
    def from_map(cls, flags: "SupFlags | Mapping[str, Any] | tuple[Any, ...]") -> "SupFlags":
        """Build flags from an OTP-style map, the old ``(strategy, intensity, period)``
        tuple, or flags (returned as they are). Missing keys take the defaults."""
        if isinstance(flags, SupFlags):
            return flags
        if isinstance(flags, Mapping):
            unknown = sorted(set(flags) - _SUP_FLAGS_KEYS, key=repr)
            if unknown:
                raise InvalidSupFlags("key", unknown[0], "is not one of " + ", ".join(sorted(_SUP_FLAGS_KEYS)))
            return cls(**flags)
        if isinstance(flags, tuple) and len(flags) == 3:
            strategy, intensity, period = flags
            return cls(strategy=strategy, intensity=intensity, period=period)
        raise InvalidSupFlags("flags", flags, "is not SupFlags, a mapping or a 3-tuple")


_SUP_FLAGS_KEYS = frozenset(("strategy", "intensity", "period", "auto_shutdown"))


def check_childspecs(
    specs: Iterable["ChildSpec | Mapping[str, Any] | tuple[Any, ...]"],
    auto_shutdown: AutoShutdown | None = None,
) -> tuple[ChildSpec, ...]:
    """Validate a list of child specs together (OTP ``check_childspecs/1,2``).

    Converts maps and tuples to ``ChildSpec`` and rejects duplicate ids (OTP
    ``duplicate_child_name``).  When ``auto_shutdown`` is given (not None,
    OTP's ``undefined``), also rejects significant children under
    ``'never'`` (OTP ``bad_combination``); left out, as in OTP's
    ``check_childspecs/1``, that combination is not checked.  Returns the
    specs in start order.
    """
    if isinstance(specs, (str, bytes, Mapping)) or not isinstance(specs, Iterable):
        raise InvalidChildSpec("children", specs, "is not a list of child specs")
    if auto_shutdown is not None and not _one_of(auto_shutdown, AUTO_SHUTDOWN_MODES):
        raise InvalidSupFlags("auto_shutdown", auto_shutdown, _one_of_text(AUTO_SHUTDOWN_MODES))
    checked: list[ChildSpec] = []
    seen: set[Hashable] = set()
    for raw in specs:
        spec = ChildSpec.from_map(raw)
        if spec.id in seen:
            raise InvalidChildSpec("id", spec.id, "is a duplicate child id")
        if spec.significant and auto_shutdown == "never":
            raise InvalidChildSpec(
                "significant",
                spec.significant,
                f"is not allowed for child {spec.id!r} when auto_shutdown is 'never'",
            )
        seen.add(spec.id)
        checked.append(spec)
    return tuple(checked)


def check_startspec(
    flags: "SupFlags | Mapping[str, Any] | tuple[Any, ...]",
    specs: Iterable["ChildSpec | Mapping[str, Any] | tuple[Any, ...]"],
) -> tuple[SupFlags, tuple[ChildSpec, ...]]:
    """Validate what a supervisor's ``init`` returned: flags and child specs.

    On top of ``check_childspecs``, a simple_one_for_one supervisor needs
    exactly one spec, its template (OTP ``bad_start_spec`` otherwise).
    """
    sup_flags = SupFlags.from_map(flags)
    children = check_childspecs(specs, sup_flags.auto_shutdown)
    if sup_flags.strategy == "simple_one_for_one" and len(children) != 1:
        raise InvalidChildSpec(
            "children",
            [spec.id for spec in children],
            "must be exactly one template spec for simple_one_for_one",
        )
    return sup_flags, children
