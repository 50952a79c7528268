"""smoosh's metrics: each channel's status, as upstream's ``smoosh_server:status()``
reports it, and its compactions, recorded in the channel's process (``actors.stats``).

Upstream publishes, per channel, ``active`` (compactions running),
``starting`` (being started) and ``waiting`` (the queue: its ``size`` and,
when not empty, the ``min`` and ``max`` priority) into an ETS table that
``status()`` reads.  The channel here publishes the same numbers after every
callback (`SmooshChannel._publish`), and records them too as gauges labelled
by channel, so a node's ``/metrics`` (docs/metrics.md) exposes them as
``smoosh_channel_active{channel="ratio_dbs"}`` and so on.  The counters add
what a status cannot show: how many compactions started, finished, failed.
"""

from __future__ import annotations

from typing import Any

from actors.stats import Stats

__all__ = ["STATS_DESCRIPTIONS", "count", "forget", "publish_status"]

_LABELS = ("channel",)

#: Every name recorded here: ``(name, kind, description)``, as IOQ's table.
STATS_DESCRIPTIONS: tuple[tuple[str, str, str], ...] = (
    ("smoosh.channel.active", "gauge", "compactions running in the channel (status: active)"),
    ("smoosh.channel.starting", "gauge", "compactions being started in the channel (status: starting)"),
    ("smoosh.channel.waiting", "gauge", "databases and views waiting in the channel's queue (status: waiting size)"),
    (
        "smoosh.channel.waiting.min",
        "gauge",
        "the lowest priority in the queue (status: waiting min; absent while the queue is empty)",
    ),
    (
        "smoosh.channel.waiting.max",
        "gauge",
        "the highest priority in the queue (status: waiting max; absent while the queue is empty)",
    ),
    ("smoosh.channel.started", "counter", "compactions the channel started"),
    ("smoosh.channel.finished", "counter", "compactions that ended normally"),
    ("smoosh.channel.failed", "counter", "compactions that ended abnormally (re-enqueued or adopted)"),
    ("smoosh.channel.start_failed", "counter", "compactions that could not be started (re-enqueued)"),
)

_WAITING_BOUNDS = ("min", "max")


def publish_status(stats: Stats, channel: str, status: dict[str, Any]) -> None:
    """Record one channel's status (`ChannelState.status`) as its gauges."""
    labels = (channel,)
    stats.update_labelled_gauge("smoosh.channel.active", labels, status["active"], _LABELS)
    stats.update_labelled_gauge("smoosh.channel.starting", labels, status["starting"], _LABELS)
    waiting = status["waiting"]
    stats.update_labelled_gauge("smoosh.channel.waiting", labels, waiting["size"], _LABELS)
    for bound in _WAITING_BOUNDS:
        name = f"smoosh.channel.waiting.{bound}"
        if bound in waiting:
            stats.update_labelled_gauge(name, labels, waiting[bound], _LABELS)
        else:
            stats.remove_labelled_gauge(name, labels)


def forget(stats: Stats, channel: str) -> None:
    """The channel closed: its gauges go (its counters stay, counters never go back)."""
    for name, kind, _ in STATS_DESCRIPTIONS:
        if kind == "gauge":
            stats.remove_labelled_gauge(name, (channel,))


def count(stats: Stats, event: str, channel: str) -> None:
    """One compaction ``event``: ``started``, ``finished``, ``failed`` or ``start_failed``."""
    stats.increment_labelled(f"smoosh.channel.{event}", (channel,), 1, _LABELS)
