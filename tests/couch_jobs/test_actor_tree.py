"""The seed's couch_jobs_tests that need the actors, on the real supervision tree.

Server, activity monitors and notifiers run as actors under ``couch_jobs_sup``
in the test's node; subscriptions and waits go through the notifier actors.
"""

from __future__ import annotations

import pytest

import actors.couch_jobs as couch_jobs
from actors.couch_jobs import Halt, NotFound
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


def test_bad_messages_restart_couch_jobs_server(ctx):
    node = ctx["node"]
    # couch_jobs_server dies on a bad cast
    server1 = server(node)
    down = node.monitor(server1)
    server1.cast("bad_cast")
    assert down.wait(10)[1] == ("bad_cast", "bad_cast")
    wait_restored(node, server1)
    restart_app(node)

    # ... on a bad call (answering it first, as the seed's {stop, R, Reply, St})
    server2 = server(node)
    down = node.monitor(server2)
    assert server2.call("bad_call") == ("bad_call", "bad_call")
    assert down.wait(10)[1] == ("bad_call", "bad_call")
    wait_restored(node, server2)
    restart_app(node)

    # ... and on a bad info message
    server3 = server(node)
    down = node.monitor(server3)
    server3.send("a_random_message")
    assert down.wait(10)[1] == ("bad_info", "a_random_message")
    wait_restored(node, server3)
    restart_app(node)
    assert len(notifiers(node)) == 2


def test_bad_messages_restart_notifier(ctx):
    node = ctx["node"]
    couch_jobs.server.force_check_types()
    # bad cast kills the notifier
    n1 = notifiers(node)[0]
    s1 = server(node)
    down = node.monitor(n1)
    n1.cast("bad_cast")
    assert down.wait(10)[1] == ("bad_cast", "bad_cast")
    wait_restored(node, s1)
    restart_app(node)

    # bad calls kill the notifier
    n2 = notifiers(node)[0]
    s2 = server(node)
    down = node.monitor(n2)
    assert n2.call("bad_call") == ("bad_call", "bad_call")
    assert down.wait(10)[1] == ("bad_call", "bad_call")
    wait_restored(node, s2)
    restart_app(node)

    # bad info message kills the notifier
    n3 = notifiers(node)[0]
    s3 = server(node)
    down = node.monitor(n3)
    n3.send("a_bad_message")
    assert down.wait(10)[1] == ("bad_info", "a_bad_message")
    wait_restored(node, s3)
    restart_app(node)
    assert len(notifiers(node)) == 2


def test_bad_messages_restart_activity_monitor(ctx):
    node = ctx["node"]
    couch_jobs.server.force_check_types()
    m1 = activity_monitors(node)[0]
    s1 = server(node)
    down = node.monitor(m1)
    m1.cast("bad_cast")
    assert down.wait(10)[1] == ("bad_cast", "bad_cast")
    wait_restored(node, s1)
    restart_app(node)

    m2 = activity_monitors(node)[0]
    s2 = server(node)
    down = node.monitor(m2)
    assert m2.call("bad_call") == ("bad_call", "bad_call")
    assert down.wait(10)[1] == ("bad_call", "bad_call")
    wait_restored(node, s2)
    restart_app(node)

    m3 = activity_monitors(node)[0]
    s3 = server(node)
    down = node.monitor(m3)
    m3.send("a_bad_message")
    assert down.wait(10)[1] == ("bad_info", "a_bad_message")
    wait_restored(node, s3)
    restart_app(node)
    assert len(activity_monitors(node)) == 2


def test_subscribe(ctx):
    t, j = ctx["t1"], ctx["j1"]
    couch_jobs.add(None, t, j, {"z": 1})

    with pytest.raises(NotFound):
        couch_jobs.subscribe("xyz", j)
    with pytest.raises(NotFound):
        couch_jobs.subscribe(t, "j5")

    sub_res0 = couch_jobs.subscribe(t, j)
    sub0, state, data = sub_res0
    assert (state, data) == ("pending", {"z": 1})
    assert couch_jobs.subscribe(t, j) == sub_res0
    couch_jobs.unsubscribe(sub0)

    sub, state, data = couch_jobs.subscribe(t, j)
    assert (state, data) == ("pending", {"z": 1})

    job, _ = couch_jobs.accept(t)
    assert couch_jobs.wait(sub, timeout=5) == (t, j, "running", {"z": 1})

    # intermediate `running` updates
    couch_jobs.update(None, job, {"z": 2})
    assert couch_jobs.wait(sub, timeout=5) == (t, j, "running", {"z": 2})

    couch_jobs.finish(None, job, {"z": 3})
    assert couch_jobs.wait(sub, "finished", timeout=5) == (t, j, "finished", {"z": 3})
    assert couch_jobs.wait(sub, timeout=0.05) is None

    assert couch_jobs.subscribe(t, j) == (None, "finished", {"z": 3})
    couch_jobs.remove(None, t, j)
    with pytest.raises(NotFound):
        couch_jobs.subscribe(t, j)


def test_subscribe_wait_multiple(ctx):
    t, j1, j2 = ctx["t1"], ctx["j1"], ctx["j2"]
    couch_jobs.add(None, t, j1, {})
    couch_jobs.add(None, t, j2, {})
    s1, state1, _ = couch_jobs.subscribe(t, j1)
    s2, state2, _ = couch_jobs.subscribe(t, j2)
    assert state1 == state2 == "pending"
    subs = [s1, s2]

    pjob1, _ = couch_jobs.accept(t)
    assert couch_jobs.wait(subs, timeout=5).state == "running"
    assert couch_jobs.wait(subs, timeout=0.05) is None

    pjob2, _ = couch_jobs.accept(t)
    assert couch_jobs.wait(subs, timeout=5).state == "running"
    assert couch_jobs.wait(subs, timeout=0.05) is None

    couch_jobs.update(None, pjob1, {"q": 5})
    couch_jobs.update(None, pjob2, {"r": 6})
    assert couch_jobs.wait(subs, timeout=5).state == "running"
    assert couch_jobs.wait(subs, timeout=5).state == "running"

    couch_jobs.finish(None, pjob1)
    event = couch_jobs.wait(subs, "finished", timeout=5)
    assert event.state == "finished" and event.data == {"q": 5}
    assert couch_jobs.wait(subs, "finished", timeout=0.05) is None

    # unsubscribe discards the finished event already on its way
    couch_jobs.finish(None, pjob2)
    couch_jobs.unsubscribe(s1)
    couch_jobs.unsubscribe(s2)
    assert couch_jobs.wait(subs, "finished", timeout=0.2) is None


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
    assert watcher.call(("wait", sub, None, 0.05), timeout=10) is None

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
