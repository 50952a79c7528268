"""The observer's server on a real node: the token, the picture, the actions."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import actors.couch_jobs as couch_jobs
from actors import Node
from actors.tools.observer import observe
from actors.tools.observer.source import ref_of
from tests.couch_jobs.conftest import store_url  # noqa: F401 (a fixture)
from tests.observer.conftest import get, row, small_tree, snapshot, wait_picture
from tests.postgres import HOW_TO_GET, postgres_missing

pytestmark = pytest.mark.integration


@contextmanager
def observe_command(node: Node) -> Iterator[tuple[subprocess.Popen, str]]:
    """``python -m actors observe`` attached to ``node`` in its own process, and
    the token URL it printed; terminated when the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "actors", "observe", node.rundir, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        url = ""
        for _ in range(5):  # a header line, then the URL
            line = proc.stdout.readline()
            if line.startswith("open "):
                url = line.split()[1]
                break
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.poll() is not None else url
        yield proc, url
    finally:
        proc.terminate()
        proc.wait(10)


def test_every_path_needs_the_token(observer: Any) -> None:
    base = f"http://127.0.0.1:{observer.port}"
    for path in ("/", "/api/snapshot", "/api/events", "/static/observer.js", "/nothing"):
        status, body = get(base + path)
        assert status == 403, path
        assert b"token" in body
    assert get(base + "/api/snapshot?token=wrong")[0] == 403
    status, body = get(observer.url)
    assert status == 200 and b"otpy" in body
    assert get(f"{base}/static/observer.js?token={observer.token}")[0] == 200
    # An action needs the token in its header: a query string or a cookie is not enough.
    data = json.dumps({"actor": "n.1"}).encode()
    assert get(f"{base}/api/actor/kill?token={observer.token}", {"Content-Type": "application/json"}, data)[0] == 403


def test_binds_loopback_and_prints_a_token_url(observer: Any) -> None:
    assert observer.url.startswith(f"http://127.0.0.1:{observer.port}/?token=")
    assert len(observer.token) >= 24


def test_the_picture_shows_the_tree_hosts_and_intensity(observer: Any) -> None:
    picture = snapshot(observer)
    keys = [r["key"] for r in picture["tree"]]
    assert keys[:5] == ["obs_top", "obs_top/alpha", "obs_top/beta", "obs_top/inner", "obs_top/inner/gamma"]
    top = row(picture, "obs_top")
    assert (top["strategy"], top["intensity"], top["period"], top["used"]) == ("one_for_one", 20, 5, 0)
    beta = row(picture, "obs_top/beta")
    assert (beta["restart"], beta["state"], beta["restarts"], beta["host"]) == ("permanent", "running", 0, "obs_host")
    hosts = {h["label"]: h for h in picture["hosts"]}
    assert hosts["node"]["pid"] == os.getpid()
    assert "beta" in [a["name"] for a in hosts["obs_host"]["actors"]]
    assert hosts["obs_host"]["rss"] > 0


def _post(web: Any, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    status, raw = get(
        f"http://127.0.0.1:{web.port}{path}",
        {"Content-Type": "application/json", "X-Observer-Token": web.token},
        json.dumps(body).encode(),
    )
    return status, json.loads(raw)


def test_kill_exit_and_sigkill_restart_the_children(observer: Any) -> None:
    alpha = row(observer.collector.latest, "obs_top/alpha")
    assert _post(observer, "/api/actor/kill", {"actor": alpha["actor"]}) == (
        200,
        {"ok": True, "message": f"killed {alpha['actor']}"},
    )
    picture = wait_picture(
        observer,
        lambda p: (
            (row(p, "obs_top/alpha") or {}).get("restarts") == 1 and row(p, "obs_top/alpha").get("state") == "running"
        ),
    )
    again = row(picture, "obs_top/alpha")
    assert again["actor"] != alpha["actor"] and again["last_exit"] == "killed"
    assert row(picture, "obs_top")["used"] >= 1

    gamma = row(picture, "obs_top/inner/gamma")
    status, answer = _post(observer, "/api/actor/exit", {"actor": gamma["actor"], "reason": "kill"})
    assert (status, answer["ok"]) == (200, True)
    wait_picture(observer, lambda p: (row(p, "obs_top/inner/gamma") or {}).get("restarts") == 1)

    beta = row(observer.collector.latest, "obs_top/beta")
    host = next(h for h in observer.collector.latest["hosts"] if h["label"] == "obs_host")
    status, answer = _post(observer, "/api/host/sigkill", {"proc": host["proc"]})
    assert (status, answer) == (200, {"ok": True, "message": f"SIGKILL sent to pid {host['pid']}"})
    picture = wait_picture(
        observer,
        lambda p: (
            (row(p, "obs_top/beta") or {}).get("restarts") == 1 and row(p, "obs_top/beta").get("state") == "running"
        ),
    )
    assert row(picture, "obs_top/beta")["pid"] != beta["pid"]
    assert any(r["child"] == "beta" and r["action"] == "restarting" for r in picture["log"])


def test_actions_only_target_what_the_node_listed(observer: Any) -> None:
    assert _post(observer, "/api/actor/kill", {"actor": "n.9999"})[0] == 404
    assert _post(observer, "/api/host/sigkill", {"proc": "n"})[0] == 404  # never the node itself
    alpha = row(observer.collector.latest, "obs_top/alpha")
    assert _post(observer, "/api/actor/exit", {"actor": alpha["actor"], "reason": "  "})[0] == 400


def test_observe_command_attaches_to_a_running_node(tmp_path: Any) -> None:
    with Node() as node:
        small_tree(node)
        with observe_command(node) as (proc, url):
            status, body = get(url.replace("/?token=", "/api/snapshot?token="))
            assert status == 200
            picture = json.loads(body)
            assert [r["key"] for r in picture["tree"]][:2] == ["obs_top", "obs_top/alpha"]
            assert picture["node"]["pid"] == os.getpid()
            # The kill goes through the node (Node.kill), the observer being another process.
            alpha = row(picture, "obs_top/alpha")
            old = next(a for a in node.actors() if a["id"] == alpha["actor"])
            monitor = node.monitor(ref_of(node.id, old))
            status, raw = get(
                url.replace("/?token=", "/api/actor/kill?x="),
                {"Content-Type": "application/json", "X-Observer-Token": url.split("token=")[1]},
                json.dumps({"actor": alpha["actor"]}).encode(),
            )
            assert status == 200 and json.loads(raw)["ok"]
            assert monitor.wait(10)[1] == "killed"
        assert proc.returncode is not None


def test_observe_command_refuses_a_directory_without_a_node(tmp_path: Any) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "actors", "observe", str(tmp_path), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert result.returncode == 2 and "not the runtime directory" in result.stderr


def _events(url: str) -> Any:
    """The pictures the observer streams, one per server-sent event."""
    import urllib.request

    with urllib.request.urlopen(url.replace("/?token=", "/api/events?token="), timeout=20) as stream:
        for line in stream:
            if line.startswith(b"data: "):
                yield json.loads(line[6:])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_demo_observe_shows_every_service_panel(store: str, tmp_path: Any) -> None:
    """``demo --observe``: the page's picture has the four services' panels, read from the real services;
    couch_jobs' counts come from its store whichever it is (a SQLite file, or PostgreSQL)."""
    if store == "postgres":
        if postgres_missing():
            pytest.skip(HOW_TO_GET)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "actors",
            "demo",
            "--short",
            "--no-live",
            "--seed",
            "2",
            "--observe",
            "0",
            "--store",
            store,
            "--state-dir",
            str(tmp_path / "state"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        url, seen = "", []
        for _ in range(20):
            line = proc.stdout.readline()
            seen.append(line)
            if line.startswith("observer: "):
                url = line.split()[1]
                break
        assert url.startswith("http://127.0.0.1:"), f"the demo printed no observer URL: {''.join(seen)[-2000:]}"
        wanted = {"ioq", "smoosh", "replicator", "couch_jobs"}
        picture: dict[str, Any] = {}
        for count, picture in enumerate(_events(url)):
            panels = picture["panels"]
            if (
                wanted <= set(panels)
                and all("error" not in panels[w] for w in wanted)
                and panels["replicator"]["jobs"]
                and panels["smoosh"]["channels"]
            ):
                break
            assert count < 200, f"panels never all up: {panels}"
        else:
            raise AssertionError(f"the demo ended before its panels were all up: {picture.get('panels')}")
        panels = picture["panels"]
        assert {s["class"] for s in panels["ioq"]["servers"]} >= {"Ioq2Server"}
        assert "ratio_dbs" in {c["channel"] for c in panels["smoosh"]["channels"]}
        assert sum(panels["replicator"]["counts"].values()) == len(panels["replicator"]["jobs"]) > 0
        assert "demo_job" in {t["type"] for t in panels["couch_jobs"]["types"]}
        assert any(r["key"] == "couch_sup" and r["strategy"] == "one_for_one" for r in picture["tree"])
    finally:
        proc.send_signal(2)  # SIGINT: the demo closes its node and its observer on the way out
        proc.wait(60)


def _observer_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("otpy-observer")]


def test_closing_the_node_closes_its_observers_first() -> None:
    """No ``web.close()``: the node's close stops both observers' threads and frees their ports."""
    node = Node()
    small_tree(node)
    webs = [observe(node, port=0), observe(node, port=0)]
    assert len(_observer_threads()) == 4
    node.close()
    assert _observer_threads() == []
    for web in webs:
        with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
            probe.connect(("127.0.0.1", web.port))
    node.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        observe(node, port=0)


def test_an_observer_closed_first_closes_once_more_with_the_node() -> None:
    with Node() as node:
        web = observe(node, port=0)
        assert snapshot(web)["node"]
        web.close()
        assert _observer_threads() == []
        web.close()  # idempotent
    assert _observer_threads() == []


def test_observe_command_reads_couch_jobs_counts_from_either_store(store_url: str) -> None:
    """Attached from another process, the observer opens couch_jobs' store from the node's config, read-only."""
    with Node() as node:
        couch_jobs.start(node, store_url)
        try:
            jobs = couch_jobs.default()
            jobs.set_type_timeout("obs_type", 30)
            for i in range(3):
                jobs.add(None, "obs_type", f"j{i}", {})
            jobs.accept("obs_type")
            with observe_command(node) as (_proc, url):
                status, body = get(url.replace("/?token=", "/api/snapshot?token="))
                assert status == 200
                panel = json.loads(body)["panels"]["couch_jobs"]
                assert panel == {"types": [{"type": "obs_type", "pending": 2, "running": 1}]}
        finally:
            couch_jobs.stop(node)
