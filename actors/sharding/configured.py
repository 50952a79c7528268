"""Sharded types a node starts from its configuration: ``[sharding] types``.

A deployed node (``otpy node``) runs what its ini file names, so a program
need not embed a node to host entities::

    [sharding]
    types = counter = myapp.entities:Counter, cart = myapp.carts:Cart
    shards = 100
    idle = 120
    store = postgresql://otpy@db:5432/otpy

Each ``name = module:Class`` starts that type's region (`api.start`) with
the section's ``shards`` and ``idle`` (``idle = none``: never passivate);
``store``, ``lease_ttl`` and the other keys apply as they do to a region
started from code (`settings.Settings.from_config`).  The classes are
imported when the node starts, so a typo fails the start, naming the key.
"""

from __future__ import annotations

import importlib
from typing import Any

from .settings import DEFAULT_IDLE, SECTION

__all__ = ["parse_types", "start_configured"]


def parse_types(raw: str) -> dict[str, tuple[str, str]]:
    """``"counter = pkg.mod:Counter, cart = app:Cart"`` as ``{"counter": ("pkg.mod", "Counter"), ...}``;
    a ValueError names the entry that is not ``name = module:Class``."""
    types: dict[str, tuple[str, str]] = {}
    for entry in (part.strip() for part in raw.split(",")):
        if not entry:
            continue
        name, eq, target = (s.strip() for s in entry.partition("="))
        module, colon, cls = target.partition(":")
        if not eq or not colon or not name or "." in name or not module.strip() or not cls.strip().isidentifier():
            raise ValueError(f"[{SECTION}] types: {entry!r} is not 'name = module:Class' (a name without dots)")
        if name in types:
            raise ValueError(f"[{SECTION}] types: {name!r} named twice")
        types[name] = (module.strip(), cls.strip())
    return types


def _idle(raw: Any) -> float | None:
    if raw in (None, ""):
        return DEFAULT_IDLE
    if str(raw).strip().lower() == "none":
        return None
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"[{SECTION}] idle: not a number of seconds or 'none': {raw!r}") from None


def start_configured(node: Any) -> list[str]:
    """Start every type ``[sharding] types`` names on ``node``; returns their names."""
    from .api import start  # the actors' modules only when a type is configured

    section = node.config.section(SECTION)
    types = parse_types(str(section.get("types") or ""))
    if not types:
        return []
    raw_shards = section.get("shards")
    try:
        shards = 100 if raw_shards in (None, "") else int(raw_shards)
    except ValueError:
        raise ValueError(f"[{SECTION}] shards: not an integer: {raw_shards!r}") from None
    idle = _idle(section.get("idle"))
    for name, (module, cls_name) in types.items():
        try:
            cls = getattr(importlib.import_module(module), cls_name)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"[{SECTION}] types: {name} = {module}:{cls_name} cannot be loaded: {exc}") from None
        start(node, name, cls, shards=shards, idle=idle)
    return list(types)
