"""docs/metrics.md lists every metric the node exports; the Grafana dashboard queries only those."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import actors.app.workload.jobs as workload_jobs
import actors.replicator.scheduler_state as scheduler_state
from actors._core.metrics.families import Scrape, families
from actors._core.metrics.names import map_name
from actors._core.runtime.meter import CALL_BOUNDS
from actors.couch_jobs.metrics import STATS_DESCRIPTIONS as COUCH_JOBS
from actors.ioq.ioq_stats import STATS_DESCRIPTIONS
from actors.smoosh.metrics import STATS_DESCRIPTIONS as SMOOSH

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "metrics.md").read_text()
DASHBOARD = ROOT / "docs" / "grafana" / "otpy.json"
#: What the kernel records under ``actors.`` names (each exposed as ``otpy_...``).
KERNEL_RECORDED = (
    "actors.transport.dropped_frames",
    "actors.transport.send_dropped",
    "actors.transport.lent_frames",
    "actors.transport.endpoint_takeovers",
    "actors.transport.endpoint_returns",
    "actors.net.dropped_frames",
    "actors.mailbox.dropped",
    "actors.mailbox.block_timeouts",
)
#: What the replicator scheduler records (the seed's names); checked against its source below.
REPLICATOR = {
    **{f"couch_replicator.jobs.{k}": "counter" for k in ("adds", "removes", "starts", "stops", "crashes")},
    **{
        f"couch_replicator.jobs.{k}": "gauge"
        for k in ("total", "running", "pending", "crashed", "avg_running", "avg_pending", "avg_crashed")
    },
}
DEMO = {"demo.jobs.finished": "counter", "demo.jobs.halted": "counter"}


def _full_scrape() -> Scrape:
    """A scrape with every family of the runtime holding at least one series."""
    buckets = [1] * (len(CALL_BOUNDS) + 1)
    snap = {
        "counters": {name: 1 for name in KERNEL_RECORDED} | {"supervision.escalations.top": 1},
        "gauges": {},
        "histograms": {},
        "labelled": {"supervision.child_restarts": [["top", "w", 1]]},
        "actors": {
            "call_bounds": list(CALL_BOUNDS),
            "exits": {"W": {"crash": 1}},
            "classes": {
                "W": {
                    "actors": 1,
                    "mailbox": 0,
                    "handled": 1,
                    "calls": 1,
                    "casts": 1,
                    "call_seconds": 0.1,
                    "call_buckets": buckets,
                }
            },
        },
    }
    return Scrape(processes=[snap], hosts=[{"state": "up"}], nodes=["n2"], net={})


def _sample_names(scrape: Scrape) -> set[str]:
    registry = CollectorRegistry()
    registry.register(type("C", (), {"collect": lambda self: families(scrape)})())
    text = generate_latest(registry).decode()
    return {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}


def _service_names() -> dict[str, str]:
    """Exported name -> Prometheus type, for every name the services record."""
    recorded = {
        name: {"histogram": "summary"}.get(kind, kind) for name, kind, _ in (*STATS_DESCRIPTIONS, *SMOOSH, *COUCH_JOBS)
    }
    recorded |= REPLICATOR | DEMO
    return {
        map_name(name, kind).name + ("_total" if kind == "counter" else ""): kind for name, kind in recorded.items()
    }


def _exported() -> set[str]:
    names = _sample_names(_full_scrape())
    for name, kind in _service_names().items():
        names.add(name)
        if kind == "summary":
            names |= {f"{name}_count", f"{name}_sum"}
    return names


def test_the_recorded_names_listed_here_are_the_services_own() -> None:
    source = inspect.getsource(scheduler_state) + inspect.getsource(workload_jobs)
    for name in (*REPLICATOR, *DEMO):
        stem = name.rsplit(".", 1)[0]
        leaf = name.rsplit(".", 1)[1]
        assert f'"{name}"' in source or (
            f'f"{stem}.' in source and leaf.split("_")[-1] in ("running", "pending", "crashed")
        ), name


def test_docs_list_every_metric() -> None:
    listed = set(re.findall(r"`([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^`]*\})?`", DOC))
    missing = set()
    for name in _sample_names(_full_scrape()):
        base = re.sub(r"_(bucket|count|sum)$", "", name) if name.startswith("otpy_actor_call_duration") else name
        if base not in listed:
            missing.add(base)
    missing |= {name for name in _service_names() if name not in listed}
    assert not missing, f"docs/metrics.md does not list: {sorted(missing)}"


def test_dashboard_is_a_grafana_dashboard_model() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert isinstance(dash["title"], str) and dash["title"]
    assert isinstance(dash["uid"], str) and re.fullmatch(r"[a-zA-Z0-9_-]{1,40}", dash["uid"])
    assert isinstance(dash["schemaVersion"], int)
    assert dash["__inputs"][0]["pluginId"] == "prometheus"
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource" and variables["DS_PROMETHEUS"]["query"] == "prometheus"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) for i in ids)
    for panel in dash["panels"]:
        assert panel["type"] in ("timeseries", "stat") and panel["title"]
        pos = panel["gridPos"]
        assert all(isinstance(pos[k], int) for k in ("h", "w", "x", "y")) and pos["x"] + pos["w"] <= 24
        assert panel["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs))
        assert all(t["expr"].strip() for t in panel["targets"])


def test_every_metric_the_dashboard_queries_is_exported() -> None:
    dash = json.loads(DASHBOARD.read_text())
    exported = _exported()
    queried = set()
    for panel in dash["panels"]:
        for target in panel["targets"]:
            # metric names are the identifiers followed by a selector or a range, never by "(" (functions)
            queried |= set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{", target["expr"]))
    assert queried, "the dashboard queries nothing"
    unknown = queried - exported
    assert not unknown, f"the dashboard queries metrics the node does not export: {sorted(unknown)}"
    # and it draws the main job's essentials
    assert {
        "otpy_supervisor_restarts_total",
        "otpy_actor_calls_total",
        "otpy_actor_exits_total",
        "otpy_actor_call_duration_seconds_bucket",
        "couch_replicator_jobs_running",
    } <= queried
