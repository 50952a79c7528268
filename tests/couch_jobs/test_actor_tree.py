"""The seed's couch_jobs_tests that need the actors, on the real supervision tree.

Server, activity monitors and notifiers run as actors under ``couch_jobs_sup``
in the test's node; subscriptions and waits go through the notifier actors.
"""

from __future__ import annotations

import pytest

import actors.couch_jobs as couch_jobs
from actors.couch_jobs import Halt
from actors.couch_jobs.server import get_notifier_server
from tests.couch_jobs.actor_fixtures import (
    activity_monitors,
    notifiers,
    restart_app,
    server,
    start_tree,
    wait_restored,
)
from tests.couch_jobs.actor_workers import Worker
from tests.couch_jobs.seed_cases import nothing_more, subscribe_case, subscribe_wait_multiple_case

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def ctx(node, store_url):
    # Short jitter so enqueue_inactive's checks land soon after the timeout.
    yield from start_tree(node, store_url, {"activity_monitor_max_jitter_msec": "100"})


def test_type_timeouts_and_server(ctx):
    node, t = ctx["node"], ctx["t1"]
    couch_jobs.server.force_check_types()
    assert couch_jobs.get_type_timeout(t) == ctx["t1_timeout"]
    assert len(activity_monitors(node)) == 2
    assert len(notifiers(node)) == 2
    # each type has its own notifier, and those are the notifier_sup's children
    pair = {get_notifier_server(t), get_notifier_server(ctx["t2"])}
    assert pair == set(notifiers(node))

    couch_jobs.set_type_timeout("t3", 8)
    couch_jobs.server.force_check_types()
    assert len(activity_monitors(node)) == 3
    assert len(notifiers(node)) == 3

    couch_jobs.clear_type_timeout("t3")
    couch_jobs.server.force_check_types()
    assert len(activity_monitors(node)) == 2
    assert len(notifiers(node)) == 2
    assert get_notifier_server("t3") is None
    assert couch_jobs.get_type_timeout("t3") is None


def test_dead_notifier_restarts_jobs_server(ctx):
    node = ctx["node"]
    couch_jobs.server.force_check_types()
    server1 = server(node)
    down = node.monitor(server1)
    notifier1, _notifier2 = notifiers(node)
    node.kill(notifier1)
    # Killing a notifier kills the server as well ...
    assert down.wait(10)[0] == server1
    # ... and the tree brings both back.
    assert wait_restored(node, server1) != server1
    assert len(notifiers(node)) == 2
    assert notifier1 not in notifiers(node)
    assert len(activity_monitors(node)) == 2


def kill_with_bad_messages(node, pick, info: str = "a_bad_message") -> None:
    """The seed's bad-message checks on one actor of the tree, ``pick(node)``
    picked afresh each time: a bad cast, a bad call (answered first, as the
    seed's ``{stop, R, Reply, St}``) and a bad info message each make it exit
    with that reason, the tree brings the server back, and the app restarts."""
    for way, message, reason in (
        ("cast", "bad_cast", ("bad_cast", "bad_cast")),
        ("call", "bad_call", ("bad_call", "bad_call")),
        ("send", info, ("bad_info", info)),
    ):
        target, server_before = pick(node), server(node)
        down = node.monitor(target)
        if way == "call":
            assert target.call(message) == reason
        else:
            getattr(target, way)(message)
        assert down.wait(10)[1] == reason, way
        wait_restored(node, server_before)
        restart_app(node)


def test_bad_messages_restart_couch_jobs_server(ctx):
    node = ctx["node"]
    kill_with_bad_messages(node, server, info="a_random_message")
    assert len(notifiers(node)) == 2


def test_bad_messages_restart_notifier(ctx):
    node = ctx["node"]
    couch_jobs.server.force_check_types()
    kill_with_bad_messages(node, lambda n: notifiers(n)[0])
    assert len(notifiers(node)) == 2


def test_bad_messages_restart_activity_monitor(ctx):
    node = ctx["node"]
    couch_jobs.server.force_check_types()
    kill_with_bad_messages(node, lambda n: activity_monitors(n)[0])
    assert len(activity_monitors(node)) == 2


def test_subscribe(ctx):
    subscribe_case(ctx)


def test_subscribe_wait_multiple(ctx):
    # a finished event in flight crosses actors here: watch longer for it
    subscribe_wait_multiple_case(ctx)


@pytest.mark.timeout(30)
def test_enqueue_inactive(ctx):
    t, j, timeout = ctx["t1"], ctx["j1"], ctx["t1_timeout"]
    couch_jobs.server.force_check_types()
    couch_jobs.add(None, t, j, {"y": 1})
    job, _ = couch_jobs.accept(t)
    sub, state, data = couch_jobs.subscribe(t, j)
    assert (state, data) == ("running", {"y": 1})
    # The real activity monitor actor re-enqueues it after two checks.
    event = couch_jobs.wait(sub, "pending", timeout=3 * timeout + 1)
    assert event == (t, j, "pending", {"y": 1})
    assert couch_jobs.get_job(t, j).state == "pending"
    with pytest.raises(Halt):
        couch_jobs.update(None, job)
    with pytest.raises(Halt):
        couch_jobs.finish(None, job)


@pytest.mark.integration
def test_subscribe_and_wait_from_another_process(ctx):
    node, t, j = ctx["node"], ctx["t1"], ctx["j1"]
    couch_jobs.add(None, t, j, {"v": 0})
    watcher = node.spawn(Worker, t, 0, host="watcher")
    sub, state, data = watcher.call(("subscribe", j), timeout=30)
    assert (state, data) == ("pending", {"v": 0})
    assert watcher.call(("subscribe", j), timeout=30)[0] == sub  # same subscriber, same sub

    job, _ = couch_jobs.accept(t)
    assert watcher.call(("wait", sub, None, 5), timeout=10) == (t, j, "running", {"v": 0})
    job = couch_jobs.update(None, job, {"v": 1})
    assert watcher.call(("wait", [sub], "running", 5), timeout=10) == (t, j, "running", {"v": 1})
    couch_jobs.finish(None, job, {"v": 2})
    assert watcher.call(("wait", sub, "finished", 5), timeout=10) == (t, j, "finished", {"v": 2})
    nothing_more(
        sub,
        subscribe=lambda marker: watcher.call(("subscribe", marker), timeout=30),
        wait=lambda subs: watcher.call(("wait", subs, None, 10), timeout=20),
    )

    # and the other way round: the host program waits on a job worked elsewhere
    couch_jobs.add(None, t, "j2", {})
    sub2, _, _ = couch_jobs.subscribe(t, "j2")
    worker = node.spawn(Worker, t, 1, host="worker")
    assert worker.call(("accept_once", 10), timeout=20)[0] == "j2"
    assert couch_jobs.wait(sub2, "finished", timeout=5) == (t, "j2", "finished", {})


@pytest.mark.integration
def test_removed_job_notifies_not_found_across_processes(ctx):
    node, t, j = ctx["node"], ctx["t2"], ctx["j1"]
    couch_jobs.add(None, t, j, {})
    watcher = node.spawn(Worker, t, 0, host="watcher")
    sub, _, _ = watcher.call(("subscribe", j), timeout=30)
    couch_jobs.remove(None, t, j)
    assert watcher.call(("wait", sub, None, 5), timeout=10) == (t, j, "not_found", None)
