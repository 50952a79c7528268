"""The node-local names of a sharded type's actors, and the tag of their messages."""

from __future__ import annotations

__all__ = ["TAG", "coordinator_name", "region_name", "supervisor_name"]

#: First element of every message between regions, coordinators and entities.
TAG = "$shard"


def region_name(type_name: str) -> str:
    return f"$sharding.{type_name}"


def coordinator_name(type_name: str) -> str:
    return f"$sharding.{type_name}.coordinator"


def supervisor_name(type_name: str) -> str:
    return f"$sharding.{type_name}.sup"
