"""One scrape's plain data to Prometheus metric families (pure).

`Scrape` is what `actors._core.metrics.gather` read from the node: one stats
snapshot per OS process (``Runtime.stats_snapshot``: counters, gauges,
histogram summaries, labelled counters and the per-class actor counts),
the host list, the connected nodes and the node-to-node link's counters.  `merge` adds the processes
up; `families` names everything as Prometheus expects.  No I/O here, so
the mapping is tested on data alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from actors._core.metrics.names import PREFIX, map_name, safe_label

__all__ = ["HOST_STATES", "NET_COUNTERS", "Scrape", "families", "merge", "retire"]

#: The recorded counters that have a family of their own (with labels) instead of the generic mapping.
_RESTARTS = "supervision.restarts."
_ESCALATIONS = "supervision.escalations."
_CHILD_RESTARTS = "supervision.child_restarts"
#: Host states a node reports (`Node.hosts`); each gets a sample, zero or not.
HOST_STATES = ("starting", "up", "dead")
#: The node-to-node link's counters exported: its key -> (family, help).
NET_COUNTERS: dict[str, tuple[str, str]] = {
    "ticks_out": ("otpy_net_ticks_sent", "heartbeat ticks sent to other nodes (sent only on an idle link)"),
    "ticks_in": ("otpy_net_ticks_received", "heartbeat ticks received from other nodes"),
    "frames_out": ("otpy_net_frames_sent", "frames sent to other nodes"),
    "frames_in": ("otpy_net_frames_received", "frames received from other nodes"),
    "peers_up": ("otpy_net_connections_up", "connections to other nodes that came up"),
    "peers_down": ("otpy_net_connections_down", "connections to other nodes that were lost"),
    "garbage": ("otpy_net_garbage_frames", "frames from other nodes dropped as malformed"),
    "handshake_failures": ("otpy_net_handshake_failures", "incoming connections whose handshake failed"),
}


@dataclass
class Scrape:
    """What one scrape read from the node (plain data)."""

    processes: list[dict[str, Any]] = field(default_factory=list)
    hosts: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    net: dict[str, int] = field(default_factory=dict)
    #: Processes that did not answer in time (their counts are missing from this scrape).
    unanswered: int = 0
    #: What the processes that have ended had counted (`retire`), so counters never go back.
    retired: dict[str, Any] = field(default_factory=dict)


def _empty() -> dict[str, Any]:
    return {
        "counters": {},
        "gauges": {},
        "histograms": {},
        "labelled": {},
        "labelled_gauges": {},
        "label_names": {},
        "classes": {},
        "exits": {},
        "call_bounds": [],
    }


def merge(snapshots: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Add up processes' snapshots: counters, gauges, labelled counters and per-class
    counts sum; a histogram's count and sum add up, its quantiles are those of the
    process with the most samples (quantiles of parts do not add)."""
    out = _empty()
    counters, gauges, hists = out["counters"], out["gauges"], out["histograms"]
    labelled: dict[str, dict[tuple[str, ...], float]] = {}
    labelled_gauges: dict[str, dict[tuple[str, ...], float]] = {}
    for snap in snapshots:
        out["label_names"].update(snap.get("label_names", {}))
        for name, rows in snap.get("labelled_gauges", {}).items():
            gauge_by = labelled_gauges.setdefault(name, {})
            for *labels, value in rows:
                gauge_by[tuple(labels)] = gauge_by.get(tuple(labels), 0) + value
        for name, value in snap.get("counters", {}).items():
            counters[name] = counters.get(name, 0) + value
        for name, value in snap.get("gauges", {}).items():
            gauges[name] = gauges.get(name, 0) + value
        for name, summary in snap.get("histograms", {}).items():
            prev = hists.get(name)
            if prev is None:
                hists[name] = dict(summary)
                continue
            best = summary if summary.get("n", 0) > prev.get("n", 0) else prev
            hists[name] = {
                **best,
                "n": prev.get("n", 0) + summary.get("n", 0),
                "sum": prev.get("sum", 0.0) + summary.get("sum", 0.0),
            }
        for name, rows in snap.get("labelled", {}).items():
            by = labelled.setdefault(name, {})
            for *labels, value in rows:
                by[tuple(labels)] = by.get(tuple(labels), 0) + value
        actors = snap.get("actors") or snap
        if actors.get("call_bounds"):
            out["call_bounds"] = list(actors["call_bounds"])
        for cls, sums in actors.get("classes", {}).items():
            into = out["classes"].get(cls)
            if into is None:
                out["classes"][cls] = {**sums, "call_buckets": list(sums["call_buckets"])}
                continue
            for key in ("actors", "mailbox", "handled", "calls", "casts", "call_seconds", "dropped"):
                into[key] = into.get(key, 0) + sums.get(key, 0)
            into["call_buckets"] = [a + b for a, b in zip(into["call_buckets"], sums["call_buckets"])]
        for cls, kinds in actors.get("exits", {}).items():
            into_kinds = out["exits"].setdefault(cls, {})
            for kind, n in kinds.items():
                into_kinds[kind] = into_kinds.get(kind, 0) + n
    out["labelled"] = {name: [[*labels, n] for labels, n in by.items()] for name, by in labelled.items()}
    out["labelled_gauges"] = {name: [[*labels, v] for labels, v in by.items()] for name, by in labelled_gauges.items()}
    return out


def retire(retired: dict[str, Any], last: dict[str, Any]) -> dict[str, Any]:
    """``retired`` plus what an ended process had counted by its last scrape: its
    counters, histogram counts and per-class totals; not its gauges or live actors."""
    counted = merge([last])
    counted["gauges"] = {}
    counted["labelled_gauges"] = {}
    counted["histograms"] = {
        k: {"n": h.get("n", 0), "sum": h.get("sum", 0.0)} for k, h in counted["histograms"].items()
    }
    for sums in counted["classes"].values():
        sums["actors"] = sums["mailbox"] = 0
    return merge([retired, counted]) if retired else counted


def _kernel(total: dict[str, Any]) -> list[Metric]:
    out: list[Metric] = []
    bounds = total["call_bounds"]
    calls = CounterMetricFamily(f"{PREFIX}actor_calls", "calls received, per actor class", labels=["class"])
    casts = CounterMetricFamily(f"{PREFIX}actor_casts", "casts received, per actor class", labels=["class"])
    handled = CounterMetricFamily(
        f"{PREFIX}actor_messages",
        "mailbox entries handled (calls, casts, plain messages, exits, DOWNs), per actor class",
        labels=["class"],
    )
    duration = HistogramMetricFamily(
        f"{PREFIX}actor_call_duration_seconds",
        "time handle_call took for calls it answered, per actor class",
        labels=["class"],
    )
    live = GaugeMetricFamily(f"{PREFIX}actors", "live actors, per actor class", labels=["class"])
    mailbox = GaugeMetricFamily(
        f"{PREFIX}actor_mailbox_messages", "messages waiting in mailboxes, summed per actor class", labels=["class"]
    )
    dropped = CounterMetricFamily(
        f"{PREFIX}actor_mailbox_dropped",
        "user messages a bounded mailbox's overflow policy dropped or refused, per actor class",
        labels=["class"],
    )
    for cls in sorted(total["classes"]):
        sums = total["classes"][cls]
        calls.add_metric([cls], sums["calls"])
        casts.add_metric([cls], sums["casts"])
        handled.add_metric([cls], sums["handled"])
        live.add_metric([cls], sums["actors"])
        mailbox.add_metric([cls], sums["mailbox"])
        dropped.add_metric([cls], sums.get("dropped", 0))
        running = 0
        buckets = []
        for bound, n in zip(list(bounds) + [float("inf")], sums["call_buckets"]):
            running += n
            buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
        duration.add_metric([cls], buckets, sums["call_seconds"])
    exits = CounterMetricFamily(
        f"{PREFIX}actor_exits", "actors that exited, per actor class and kind of reason", labels=["class", "reason"]
    )
    for cls in sorted(total["exits"]):
        for kind, n in sorted(total["exits"][cls].items()):
            exits.add_metric([cls, kind], n)
    out += [calls, duration, casts, handled, live, mailbox, dropped, exits]
    restarts = CounterMetricFamily(
        f"{PREFIX}supervisor_restarts",
        "children restarted, per supervisor "
        "(its registered name, else its actor id) and the child whose exit caused it",
        labels=["supervisor", "child"],
    )
    for supervisor, child, n in sorted(total["labelled"].get(_CHILD_RESTARTS, []), key=lambda r: r[:2]):
        restarts.add_metric([safe_label(supervisor), safe_label(child)], n)
    escalations = CounterMetricFamily(
        f"{PREFIX}supervisor_shutdowns",
        "supervisors that gave up: restart intensity reached, so they shut down",
        labels=["supervisor"],
    )
    for name, n in sorted(total["counters"].items()):
        if name.startswith(_ESCALATIONS):
            escalations.add_metric([safe_label(name[len(_ESCALATIONS) :])], n)
    out += [restarts, escalations]
    return out


def _recorded(total: dict[str, Any]) -> list[Metric]:
    """Every other recorded name (the services' and the kernel's dotted ones)."""
    out: dict[str, Metric] = {}
    for name, value in sorted(total["counters"].items()):
        if name.startswith((_RESTARTS, _ESCALATIONS)):
            continue  # in otpy_supervisor_restarts_total / _shutdowns_total, with labels
        mapped = map_name(name, "counter")
        if mapped.name not in out:
            out[mapped.name] = CounterMetricFamily(mapped.name, f"{name} (counter)", value=value * mapped.factor)
    for name, value in sorted(total["gauges"].items()):
        mapped = map_name(name, "gauge")
        if mapped.name not in out:
            out[mapped.name] = GaugeMetricFamily(mapped.name, f"{name} (gauge)", value=value * mapped.factor)
    names = total.get("label_names", {})
    for kind, rows_by_name, family_type in (
        ("counter", total["labelled"], CounterMetricFamily),
        ("gauge", total.get("labelled_gauges", {}), GaugeMetricFamily),
    ):
        for name, rows in sorted(rows_by_name.items()):
            if name == _CHILD_RESTARTS or not rows:
                continue  # in otpy_supervisor_restarts_total
            mapped = map_name(name, kind)
            if mapped.name in out:
                continue
            width = len(rows[0]) - 1
            label_names = list(names.get(name) or [])
            if len(label_names) != width:
                label_names = [f"label{i + 1}" for i in range(width)]
            per = family_type(mapped.name, f"{name} ({kind}, per {', '.join(label_names)})", labels=label_names)
            for *labels, value in sorted(rows, key=lambda row: [str(x) for x in row[:-1]]):
                if len(labels) == width:
                    per.add_metric([safe_label(x) for x in labels], value * mapped.factor)
            out[mapped.name] = per
    for name, summary in sorted(total["histograms"].items()):
        mapped = map_name(name, "summary")
        if mapped.name in out:
            continue
        family = SummaryMetricFamily(
            mapped.name,
            f"{name} (count and sum of every sample; quantiles of the recent samples of its busiest process)",
        )
        family.add_metric([], count_value=summary.get("n", 0), sum_value=summary.get("sum", 0.0) * mapped.factor)
        for q in ("p50", "p99"):
            if q in summary:
                family.add_sample(mapped.name, {"quantile": str(int(q[1:]) / 100)}, summary[q] * mapped.factor)
        out[mapped.name] = family
    return list(out.values())


def _node(scrape: Scrape) -> list[Metric]:
    hosts = GaugeMetricFamily(f"{PREFIX}hosts", "host processes of the node, per state", labels=["state"])
    for state in HOST_STATES:
        hosts.add_metric([state], sum(1 for h in scrape.hosts if h.get("state") == state))
    processes = GaugeMetricFamily(
        f"{PREFIX}processes_scraped",
        "OS processes of the node whose counts this scrape includes (the node's own and every host up)",
        value=len(scrape.processes),
    )
    unanswered = GaugeMetricFamily(
        f"{PREFIX}processes_unanswered",
        "host processes that did not answer this scrape in time",
        value=scrape.unanswered,
    )
    nodes = GaugeMetricFamily(f"{PREFIX}nodes_up", "other nodes this node is connected to", value=len(scrape.nodes))
    out: list[Metric] = [hosts, processes, unanswered, nodes]
    for key, (name, text) in NET_COUNTERS.items():
        family = CounterMetricFamily(name, text)
        family.add_metric([], scrape.net.get(key, 0))
        out.append(family)
    return out


def families(scrape: Scrape) -> list[Metric]:
    """Every family of one scrape, counts summed over the node's processes (and those that ended)."""
    total = merge([scrape.retired, *scrape.processes]) if scrape.retired else merge(scrape.processes)
    return _kernel(total) + _node(scrape) + _recorded(total)
