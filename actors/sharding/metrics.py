"""Sharding's metrics, recorded in the region's process (``actors.stats``), labelled by type.

A node's ``/metrics`` (docs/metrics.md) exposes them as
``sharding_activations_total{type="cart"}`` and so on.
"""

from __future__ import annotations

from actors.stats import Stats

__all__ = ["STATS_DESCRIPTIONS", "buffered", "count"]

_LABELS = ("type",)

#: Every name recorded here: ``(name, kind, description)``.
STATS_DESCRIPTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "sharding.activations",
        "counter",
        "entities started (first message for their key, after a move or a passivation)",
    ),
    ("sharding.passivations", "counter", "entities stopped for being idle, least recently used, or handed off"),
    ("sharding.handoffs", "counter", "shards this node handed off to another node"),
    ("sharding.buffered", "counter", "messages held while their shard had no home or their entity was moving"),
    ("sharding.dropped", "counter", "messages refused because their shard's buffer was full"),
    ("sharding.buffer", "gauge", "messages held in the region's buffers now"),
)


def count(stats: Stats, event: str, type_name: str, amount: int = 1) -> None:
    stats.increment_labelled(f"sharding.{event}", (type_name,), amount, _LABELS)


def buffered(stats: Stats, type_name: str, held: int) -> None:
    stats.update_labelled_gauge("sharding.buffer", (type_name,), held, _LABELS)
