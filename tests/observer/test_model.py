"""The page's picture from snapshots: pure functions, no processes."""

from __future__ import annotations

from typing import Any

from actors.tools.observer import model
from actors.tools.observer.probes import replication_rows


def _sup(
    actor_id: str,
    name: str | None,
    parent: str | None,
    strategy: str,
    children: list[dict[str, Any]],
    reports: list[dict[str, Any]] | None = None,
    used: int = 0,
) -> dict[str, Any]:
    return {
        "id": actor_id,
        "registered": name,
        "class": "Sup",
        "parent": parent,
        "proc": "n",
        "pid": 1,
        "host": "node",
        "mailbox": 0,
        "handled": 0,
        "status": {
            "strategy": strategy,
            "children": len(children),
            "restarts": 0,
            "detail": {"intensity": 3, "period": 5, "used": used, "children": children, "reports": reports or []},
        },
    }


def _worker(actor_id: str, parent: str, proc: str = "n", mailbox: int = 0, handled: int = 0) -> dict[str, Any]:
    return {
        "id": actor_id,
        "registered": None,
        "class": "Worker",
        "parent": parent,
        "proc": proc,
        "pid": 7,
        "host": proc,
        "mailbox": mailbox,
        "handled": handled,
        "status": None,
    }


def _spec(
    cid: str | None,
    actor: str | None,
    state: str = "running",
    restarts: int = 0,
    last_exit: str | None = None,
    ctype: str = "worker",
) -> dict[str, Any]:
    return {
        "id": cid,
        "actor": actor,
        "restart": "permanent",
        "type": ctype,
        "state": state,
        "restarts": restarts,
        "last_exit": last_exit,
    }


def test_tree_rows_follow_the_supervisor_order_and_key_children_by_spec_id() -> None:
    actors = [
        _worker("n.3", "n.1"),
        _sup(
            "n.1",
            "top",
            None,
            "one_for_one",
            [_spec("b", "n.3", restarts=2, last_exit="killed"), _spec("a", None, state="restarting")],
        ),
    ]
    rows = model.tree_rows(actors)
    assert [(r["key"], r["depth"], r["name"], r["state"]) for r in rows] == [
        ("top", 0, "top", "running"),
        ("top/b", 1, "b", "running"),
        ("top/a", 1, "a", "restarting"),
    ]
    b = rows[1]
    assert (b["actor"], b["restarts"], b["last_exit"], b["restart"]) == ("n.3", 2, "killed", "permanent")
    assert rows[2].get("actor") is None
    assert (rows[0]["strategy"], rows[0]["used"], rows[0]["intensity"]) == ("one_for_one", 0, 3)


def test_a_restarted_child_keeps_its_row_key() -> None:
    before = model.tree_rows([_sup("n.1", "top", None, "one_for_one", [_spec("w", "n.2")]), _worker("n.2", "n.1")])
    after = model.tree_rows(
        [_sup("n.1", "top", None, "one_for_one", [_spec("w", "n.9", restarts=1)]), _worker("n.9", "n.1")]
    )
    assert before[1]["key"] == after[1]["key"] == "top/w"
    assert (before[1]["actor"], after[1]["actor"], after[1]["restarts"]) == ("n.2", "n.9", 1)


def test_nested_supervisors_and_unsupervised_children() -> None:
    actors = [
        _sup("n.1", None, None, "one_for_all", [_spec("inner", "n.2", ctype="supervisor")]),
        _sup("n.2", None, "n.1", "rest_for_one", [_spec("x", "n.4")]),
        _worker("n.4", "n.2"),
        _worker("n.5", "n.2"),  # linked by the supervisor's child, not one of its specs
    ]
    rows = model.tree_rows(actors)
    assert [(r["key"], r["depth"]) for r in rows] == [
        ("n.1", 0),
        ("n.1/inner", 1),
        ("n.1/inner/x", 2),
        ("n.1/inner/n.5", 2),
    ]
    assert rows[1]["supervisor"] and rows[1]["strategy"] == "rest_for_one"


def test_simple_one_for_one_children_are_keyed_by_actor() -> None:
    actors = [
        _sup("n.1", "pool", None, "simple_one_for_one", [_spec(None, "n.2"), _spec(None, None, "restarting")]),
        _worker("n.2", "n.1"),
    ]
    assert [r["key"] for r in model.tree_rows(actors)] == ["pool", "pool/n.2"]


def test_rates_come_from_handled_deltas() -> None:
    total, counts = model.message_delta({}, [_worker("n.2", "x", handled=5)])
    assert (total, counts) == (5, {"n.2": 5})
    total, counts = model.message_delta(counts, [_worker("n.2", "x", handled=9), _worker("n.3", "x", handled=2)])
    assert (total, counts) == (6, {"n.2": 9, "n.3": 2})
    total, _ = model.message_delta(counts, [_worker("n.3", "x", handled=2)])  # n.2 died: no negative rate
    assert total == 0


def test_host_rows_group_actors_and_join_usage() -> None:
    actors = [
        _worker("n.2", "n.1", proc="h1", mailbox=4),
        _worker("n.3", "n.1", proc="h1", mailbox=9),
        _worker("n.4", "n.1"),
    ]
    hosts = [
        {"proc": "h1", "label": "pool", "pid": 42, "cpus": [0], "state": "up"},
        {"proc": "h2", "label": None, "pid": 43, "cpus": None, "state": "dead"},
    ]
    rows = model.host_rows(
        hosts, actors, 41, {41: {"cpu": 5.0, "rss": 1e6}, 42: {"cpu": 50.0, "rss": 2e6}}, {"n.3": "deep"}
    )
    assert [(r["proc"], r["pid"], r["count"], r["mailbox"], r["cpu"]) for r in rows] == [
        ("n", 41, 1, 0, 5.0),
        ("h1", 42, 2, 13, 50.0),
    ]
    assert [a["name"] for a in rows[1]["actors"]] == ["deep", "Worker"]  # deepest mailbox first


def test_report_log_merges_once_newest_first() -> None:
    log = model.ReportLog(keep=3)
    r1 = {"seq": 1, "time": 10.0, "report": "child_terminated", "action": "restarting"}
    r2 = {"seq": 2, "time": 11.0, "report": "child_terminated", "action": "restarting"}
    assert [r["seq"] for r in log.merge([_sup("n.1", "s", None, "one_for_one", [], [r1])])] == [1]
    merged = log.merge([_sup("n.1", "s", None, "one_for_one", [], [r1, r2])])
    assert [r["seq"] for r in merged] == [2, 1]
    many = [{"seq": i, "time": 20.0 + i} for i in range(3, 8)]
    assert [r["seq"] for r in log.merge([_sup("n.1", "s", None, "one_for_one", [], many)])] == [7, 6, 5]


def test_history_keeps_the_window() -> None:
    history = model.History(window=10)
    for t in range(0, 30, 5):
        history.add(float(t), t % 2, 100.0 + t)
    assert history.series() == {"t": [15.0, 20.0, 25.0], "restarts": [1, 0, 1], "messages": [115.0, 120.0, 125.0]}


def test_replication_rows_take_the_back_off_from_the_scheduler() -> None:
    jobs = [
        {"id": "a", "pid": "<pid>", "history": [{"type": "started"}]},
        {
            "id": "b",
            "pid": None,
            "history": [{"type": "crashed", "reason": "boom"}, {"type": "crashed"}, {"type": "started"}],
        },
        {"id": "c", "pid": None, "history": [{"type": "added"}]},
        # crashed long ago, healthy since by the scheduler's threshold: not held back
        {"id": "d", "pid": None, "history": [{"type": "crashed", "reason": "old"}, {"type": "started"}]},
    ]
    backoffs = [{"id": "b", "crashes": 2, "backoff": 60.0, "retry_at": 1060.0}]
    rows = replication_rows(jobs, backoffs, now=1030.0)
    assert [(r["id"], r["state"], r["crashes"], r["backoff"], r["wait"], r["last_error"]) for r in rows] == [
        ("a", "running", 0, 0.0, 0.0, None),
        ("b", "crashing", 2, 60.0, 30.0, "boom"),
        ("c", "pending", 0, 0.0, 0.0, None),
        ("d", "pending", 0, 0.0, 0.0, "old"),
    ]
    due = replication_rows(jobs[1:2], backoffs, now=2000.0)
    assert due[0]["wait"] == 0.0 and due[0]["state"] == "crashing"
