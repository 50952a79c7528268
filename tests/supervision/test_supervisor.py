"""OTP supervisor semantics (supervisor_SUITE is the model), with real actors."""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time

import pytest

import supervision as sv
from actors import Exit
from actors.clock import FakeClock
from supervision import ChildSpec, SupFlags
from tests.polling import poll_until
from tests.supervision.workers import Gated, Ignorer, Slow, Worker

pytestmark = pytest.mark.timeout(40)


def drain(q: queue.Queue) -> list:
    out = []
    while True:
        try:
            out.append(q.get_nowait())
        except queue.Empty:
            return out


def child_ref(sup, cid):
    for row in sv.which_children(sup):
        if row.id == cid:
            return row.child
    raise KeyError(cid)


def wait_replaced(sup, cid, old):
    """Until which_children shows a new running ref for ``cid``."""

    def replaced():
        ref = child_ref(sup, cid)
        return ref if ref is not None and not isinstance(ref, str) and ref != old else None

    return poll_until(replaced, f"a restart of {cid}")


def crash(ref):
    with pytest.raises(Exit):
        ref.call("crash")


def spec(cid, q, restart="permanent", **kw):
    return ChildSpec(cid, (Worker, (q, cid)), restart=restart, **kw)


# -- restart types ------------------------------------------------------------------


def test_permanent_child_restarted_after_any_exit(node):
    sup = sv.start_supervisor(node, SupFlags(intensity=5), [spec("p", None)])
    old = child_ref(sup, "p")
    crash(old)
    new = wait_replaced(sup, "p", old)
    assert new.call("stop_normal") == "ok"
    wait_replaced(sup, "p", new)


@pytest.mark.parametrize("how", ["stop_normal", "stop_shutdown_x"])
def test_transient_child_not_restarted_on_normal_exit_spec_kept(node, how):
    sup = sv.start_supervisor(node, SupFlags(), [spec("t", None, "transient")])
    ref = child_ref(sup, "t")
    mon = node.monitor(ref)
    assert ref.call(how) == "ok"
    mon.wait(5)
    assert sv.which_children(sup)[0].child is None
    assert sv.count_children(sup) == {"specs": 1, "active": 0, "supervisors": 0, "workers": 1}
    new = sv.restart_child(sup, "t")
    assert new != ref and new.call("hi") == ("t", "hi")
    assert child_ref(sup, "t") == new
    assert sv.count_children(sup)["active"] == 1


def test_transient_child_restarted_on_abnormal_exit(node):
    sup = sv.start_supervisor(node, SupFlags(), [spec("t", None, "transient")])
    old = child_ref(sup, "t")
    crash(old)
    wait_replaced(sup, "t", old)


def test_temporary_child_never_restarted_and_removed(node):
    sup = sv.start_supervisor(node, SupFlags(), [spec("tmp", None, "temporary")])
    ref = child_ref(sup, "tmp")
    mon = node.monitor(ref)
    crash(ref)
    mon.wait(5)
    for _ in range(100):
        if sv.which_children(sup) == []:
            break
    assert sv.which_children(sup) == []


@pytest.mark.parametrize("strategy", ["one_for_all", "rest_for_one"])
def test_temporary_bystander_is_dropped(node, strategy):
    q: queue.Queue = queue.Queue()
    sup = sv.start_supervisor(
        node, SupFlags(strategy, intensity=5), [spec("a", q), spec("tmp", q, "temporary"), spec("c", q)]
    )
    old = child_ref(sup, "a")
    crash(old)
    wait_replaced(sup, "a", old)
    assert [r.id for r in sv.which_children(sup)] == ["a", "c"]


# -- intensity ------------------------------------------------------------------------


def test_intensity_exceeded_shuts_down_in_reverse_order(node):
    q: queue.Queue = queue.Queue()
    sup = sv.start_supervisor(
        node, SupFlags("one_for_one", intensity=1, period=30), [spec("a", q), spec("b", q), spec("c", q)]
    )
    drain(q)
    mon = node.monitor(sup)
    old = child_ref(sup, "b")
    crash(old)
    wait_replaced(sup, "b", old)
    assert drain(q) == [("terminate", "b"), ("init", "b")]  # a crash runs terminate
    crash(child_ref(sup, "b"))
    assert mon.wait(5) == (sup, "shutdown")
    assert drain(q) == [("terminate", "b"), ("terminate", "c"), ("terminate", "a")]


def test_one_for_all_restart_counts_once(node):
    q: queue.Queue = queue.Queue()
    sup = sv.start_supervisor(
        node, SupFlags("one_for_all", intensity=1, period=30), [spec("a", q), spec("b", q), spec("c", q)]
    )
    old = child_ref(sup, "a")
    crash(old)
    wait_replaced(sup, "a", old)
    assert sv.count_children(sup)["active"] == 3  # still alive after a 3-child restart


def test_restarts_outside_the_period_are_forgotten(node):
    class FastClockSup(sv.Supervisor):
        def init(self, q):
            return SupFlags(intensity=1, period=5), [spec("a", q)]

    sup = node.spawn(FastClockSup, None)
    # Drive the supervisor's clock by hand: restarts 10 s apart never add up.
    clock = FakeClock(1000.0)
    sup_cell = node.runtime.cells[sup.id]
    sup_cell.server.clock = clock
    ref = child_ref(sup, "a")
    for _ in range(4):
        crash(ref)
        ref = wait_replaced(sup, "a", ref)
        clock.advance(10)
    assert sup.is_alive()


def test_escalation_permanent_child_supervisor_comes_back(node):
    q: queue.Queue = queue.Queue()
    inner = ChildSpec(
        "inner",
        (sv._supervisor._StaticSupervisor, (SupFlags(intensity=0, period=5), [spec("w", q)])),
        type="supervisor",
    )
    top = sv.start_supervisor(node, SupFlags(intensity=5), [inner])
    inner_ref = child_ref(top, "inner")
    w = child_ref(inner_ref, "w")
    drain(q)
    crash(w)
    new_inner = wait_replaced(top, "inner", inner_ref)
    new_w = child_ref(new_inner, "w")
    assert new_inner != inner_ref and new_w != w
    assert new_w.call("hi") == ("w", "hi")  # the new inner supervisor started a fresh child
    assert drain(q) == [("terminate", "w"), ("init", "w")]


def test_escalation_transient_child_supervisor_not_restarted(node):
    inner = ChildSpec(
        "inner",
        (sv._supervisor._StaticSupervisor, (SupFlags(intensity=0, period=5), [spec("w", None)])),
        type="supervisor",
        restart="transient",
    )
    top = sv.start_supervisor(node, SupFlags(intensity=5), [inner])
    inner_ref = child_ref(top, "inner")
    mon = node.monitor(inner_ref)
    crash(child_ref(inner_ref, "w"))
    assert mon.wait(5)[1] == "shutdown"
    for _ in range(100):
        if sv.which_children(top)[0].child is None:
            break
    assert sv.which_children(top)[0].child is None


# -- strategies -----------------------------------------------------------------------


def test_one_for_all_order(node):
    q: queue.Queue = queue.Queue()
    sup = sv.start_supervisor(node, SupFlags("one_for_all", intensity=5), [spec("a", q), spec("b", q), spec("c", q)])
    assert drain(q) == [("init", "a"), ("init", "b"), ("init", "c")]
    old = child_ref(sup, "b")
    crash(old)
    wait_replaced(sup, "b", old)
    events = drain(q)
    assert events == [
        ("terminate", "b"),
        ("terminate", "c"),
        ("terminate", "a"),
        ("init", "a"),
        ("init", "b"),
        ("init", "c"),
    ]


def test_rest_for_one_order(node):
    q: queue.Queue = queue.Queue()
    sup = sv.start_supervisor(
        node, SupFlags("rest_for_one", intensity=5), [spec("a", q), spec("b", q), spec("c", q), spec("d", q)]
    )
    a = child_ref(sup, "a")
    drain(q)
    old = child_ref(sup, "b")
    crash(old)
    wait_replaced(sup, "b", old)
    assert drain(q) == [
        ("terminate", "b"),
        ("terminate", "d"),
        ("terminate", "c"),
        ("init", "b"),
        ("init", "c"),
        ("init", "d"),
    ]
    assert child_ref(sup, "a") == a


def test_simple_one_for_one(node):
    q: queue.Queue = queue.Queue()
    sup = sv.start_supervisor(
        node, SupFlags("simple_one_for_one", intensity=5), [ChildSpec("w", (Worker, (q,)), restart="temporary")]
    )
    r1 = sv.start_child(sup, ["one", "x"])
    r2 = sv.start_child(sup, ("two",))
    assert r1.call("extra") == ("x",)
    assert r2.call("hi") == ("two", "hi")
    assert {row.child for row in sv.which_children(sup)} == {r1, r2}
    sv.terminate_child(sup, r1)
    assert [row.child for row in sv.which_children(sup)] == [r2]
    assert sv.terminate_child(sup, r1) is None  # OTP child_adm_simple: a dead pid is ok
    with pytest.raises(sv.SimpleOneForOne) as info:
        sv.terminate_child(sup, "w")  # a child id: OTP {error, simple_one_for_one}
    assert info.value.operation == "terminate_child"
    assert [row.child for row in sv.which_children(sup)] == [r2]
    with pytest.raises(sv.SimpleOneForOne):
        sv.restart_child(sup, "w")
    with pytest.raises(sv.SimpleOneForOne):
        sv.delete_child(sup, "w")


def test_simple_one_for_one_permanent_children_restart(node):
    sup = sv.start_supervisor(node, SupFlags("simple_one_for_one", intensity=5), [ChildSpec("w", (Worker, (None,)))])
    r1 = sv.start_child(sup, ["one"])
    crash(r1)
    for _ in range(2000):
        rows = sv.which_children(sup)
        if rows and rows[0].child != r1:
            break
    assert rows[0].child != r1 and rows[0].child.call("x") == ("one", "x")


def test_simple_one_for_one_intensity_exceeded_shuts_down(node):
    """Dynamic children's restarts count toward intensity; one too many and the
    supervisor stops every child and exits with ``shutdown`` (OTP)."""
    q: queue.Queue = queue.Queue()
    sup = sv.start_supervisor(
        node, SupFlags("simple_one_for_one", intensity=2, period=30), [ChildSpec("w", (Worker, (q,)))]
    )
    refs = {tag: sv.start_child(sup, [tag]) for tag in ("c1", "c2", "c3")}
    assert drain(q) == [("init", "c1"), ("init", "c2"), ("init", "c3")]
    mon = node.monitor(sup)
    survivors = {}
    for tag in ("c1", "c2"):  # two restarts: within intensity 2
        crash(refs[tag])
        assert q.get(timeout=5) == ("terminate", tag)
        assert q.get(timeout=5) == ("init", tag)
        survivors[tag] = next(row.child for row in sv.which_children(sup) if row.child.call("x") == (tag, "x"))
        assert survivors[tag] != refs[tag]
    assert sup.is_alive() and sv.count_children(sup)["active"] == 3
    watches = {tag: node.monitor(ref) for tag, ref in survivors.items()}
    crash(refs["c3"])  # the third restart in the period exceeds intensity 2
    assert mon.wait(5) == (sup, "shutdown")
    for tag, watch in watches.items():
        assert watch.wait(5) == (survivors[tag], "shutdown"), tag
    events = drain(q)
    assert events[0] == ("terminate", "c3")
    assert sorted(events[1:]) == [("terminate", "c1"), ("terminate", "c2")]  # c3 not restarted


def test_simple_one_for_one_restarts_outside_the_period_are_forgotten(node):
    class FakeClockSup(sv.Supervisor):
        clock = FakeClock(1000.0)

        def init(self):
            return SupFlags("simple_one_for_one", intensity=1, period=5), [ChildSpec("w", (Worker, (None,)))]

    sup = node.spawn(FakeClockSup)
    ref = sv.start_child(sup, ["d"])
    for _ in range(4):  # one restart per 10 s never exceeds 1 in 5 s
        crash(ref)
        ref = wait_dynamic_replaced(sup, ref)
        FakeClockSup.clock.advance(10)
    assert sup.is_alive()
    mon = node.monitor(sup)
    crash(ref)  # two restarts within 5 s: over intensity 1
    ref = wait_dynamic_replaced(sup, ref)
    crash(ref)
    assert mon.wait(5) == (sup, "shutdown")


def wait_dynamic_replaced(sup, old):
    """Until the one dynamic child's ref differs from ``old``."""

    def replaced():
        rows = sv.which_children(sup)
        return rows[0].child if rows and isinstance(rows[0].child, type(old)) and rows[0].child != old else None

    return poll_until(replaced, "a restart of the dynamic child")


def test_simple_one_for_one_parallel_shutdown_under_one_timeout(node):
    gate = threading.Event()
    sup = sv.start_supervisor(
        node, SupFlags("simple_one_for_one"), [ChildSpec("s", (Slow, (None,)), shutdown=1.0, restart="temporary")]
    )
    for i in range(4):
        sv.start_child(sup, (f"s{i}", gate, 3.0))
    t0 = time.monotonic()
    node.stop(sup, "shutdown")
    elapsed = time.monotonic() - t0
    gate.set()
    assert elapsed < 2.5  # four 1 s shutdowns in parallel, not 4 s


def test_dynamic_children_not_recreated_when_supervisor_restarts(node):
    child_sup = ChildSpec(
        "pool",
        (sv._supervisor._StaticSupervisor, (SupFlags("simple_one_for_one"), [ChildSpec("w", (Worker, (None,)))])),
        type="supervisor",
    )
    top = sv.start_supervisor(node, SupFlags(intensity=5), [child_sup])
    pool = child_ref(top, "pool")
    sv.start_child(pool, ["dyn"])
    node.exit(pool, "kill")
    new_pool = wait_replaced(top, "pool", pool)
    assert sv.which_children(new_pool) == []


# -- start and restart failures ----------------------------------------------------------


def test_start_failure_stops_started_children_and_names_the_child(node):
    q: queue.Queue = queue.Queue()
    plan: queue.Queue = queue.Queue()
    plan.put("fail")
    with pytest.raises(sv.StartError) as info:
        sv.start_supervisor(node, SupFlags(), [spec("a", q), spec("b", q), ChildSpec("bad", (Gated, (q, "bad", plan)))])
    assert info.value.child_id == "bad"
    assert drain(q) == [("init", "a"), ("init", "b"), ("terminate", "b"), ("terminate", "a")]


def test_failed_restart_is_retried_through_the_mailbox(node):
    q: queue.Queue = queue.Queue()
    plan: queue.Queue = queue.Queue()
    gate = threading.Event()
    Gated.gates["g"] = gate
    sup = sv.start_supervisor(node, SupFlags(intensity=5, period=30), [ChildSpec("g", (Gated, (q, "g", plan)))])
    old = child_ref(sup, "g")
    drain(q)
    plan.put("block-then-fail")
    crash(old)
    assert q.get(timeout=5) == ("terminate", "g")  # the crash
    assert q.get(timeout=5) == ("blocked", "g")  # the restart, held in init
    rows: list = []
    asker = threading.Thread(target=lambda: rows.extend(sv.which_children(sup)))
    asker.start()
    # the which_children call is queued behind the restart; let the restart fail
    for _ in range(1000):
        if node.runtime.cells[sup.id].inbox.qsize() >= 1:
            break
        threading.Event().wait(0.001)
    else:
        raise AssertionError("which_children never reached the supervisor's mailbox")
    gate.set()
    asker.join(10)
    assert rows[0].child == "restarting"
    wait_replaced(sup, "g", old)


def test_failed_restarts_count_toward_intensity(node):
    q: queue.Queue = queue.Queue()
    plan: queue.Queue = queue.Queue()
    sup = sv.start_supervisor(node, SupFlags(intensity=3, period=30), [ChildSpec("g", (Gated, (q, "g", plan)))])
    mon = node.monitor(sup)
    for _ in range(10):
        plan.put("fail")
    crash(child_ref(sup, "g"))
    assert mon.wait(10) == (sup, "shutdown")
    assert plan.qsize() == 10 - 3  # three failed restarts, then the intensity gave up


def test_ignore_keeps_spec_not_running_and_drops_temporary(node):
    sup = sv.start_supervisor(
        node, SupFlags(), [ChildSpec("i", (Ignorer, ())), ChildSpec("t", (Ignorer, ()), restart="temporary")]
    )
    rows = sv.which_children(sup)
    assert [(r.id, r.child) for r in rows] == [("i", None)]


# -- shutdown ----------------------------------------------------------------------------


def test_shutdown_timeout_then_kill(node):
    gate = threading.Event()
    q: queue.Queue = queue.Queue()
    sup = sv.start_supervisor(node, SupFlags(), [ChildSpec("s", (Slow, (q, "s", gate, 3.0)), shutdown=0.2)])
    ref = child_ref(sup, "s")
    mon = node.monitor(ref)
    t0 = time.monotonic()
    sv.terminate_child(sup, "s")
    assert time.monotonic() - t0 < 2.0
    assert mon.wait(5) == (ref, "killed")
    gate.set()


def test_brutal_kill_does_not_run_terminate(node):
    q: queue.Queue = queue.Queue()
    sup = sv.start_supervisor(node, SupFlags(), [spec("b", q, shutdown="brutal_kill")])
    ref = child_ref(sup, "b")
    mon = node.monitor(ref)
    drain(q)
    sv.terminate_child(sup, "b")
    assert mon.wait(5) == (ref, "killed")
    assert drain(q) == []


def test_shutdown_runs_terminate_in_trapping_child(node):
    q: queue.Queue = queue.Queue()
    sup = sv.start_supervisor(node, SupFlags(), [spec("w", q)])
    drain(q)
    sv.terminate_child(sup, "w")
    assert drain(q) == [("terminate", "w")]


def test_infinity_waits_for_the_child(node):
    gate = threading.Event()
    sup = sv.start_supervisor(node, SupFlags(), [ChildSpec("s", (Slow, (None, "s", gate, 0.3)), shutdown="infinity")])
    ref = child_ref(sup, "s")
    mon = node.monitor(ref)
    sv.terminate_child(sup, "s")
    assert mon.wait(5) == (ref, "shutdown")  # waited out the slow terminate


def test_sigkilled_host_child_restarts_in_fresh_host_same_cpus(node):
    sup = sv.start_supervisor(
        node, SupFlags(intensity=5), [ChildSpec("h", (Worker, (None, "h")), host="own", cpus={0})]
    )
    old = child_ref(sup, "h")
    assert old.call("cpus") == [0]
    os.kill(old.os_pid, signal.SIGKILL)
    new = wait_replaced(sup, "h", old)
    assert new.os_pid != old.os_pid
    assert new.call("cpus") == [0]


# -- API errors ---------------------------------------------------------------------------


def test_child_api_errors(node):
    sup = sv.start_supervisor(node, SupFlags(), [spec("a", None)])
    a = child_ref(sup, "a")
    with pytest.raises(sv.AlreadyStarted) as info:
        sv.start_child(sup, spec("a", None))
    assert info.value.ref == a
    with pytest.raises(sv.Running):
        sv.restart_child(sup, "a")
    with pytest.raises(sv.Running):
        sv.delete_child(sup, "a")
    with pytest.raises(sv.NotFound):
        sv.terminate_child(sup, "zz")
    sv.terminate_child(sup, "a")
    with pytest.raises(sv.AlreadyPresent):
        sv.start_child(sup, spec("a", None))
    assert sv.get_childspec(sup, "a").id == "a"
    sv.delete_child(sup, "a")
    with pytest.raises(sv.NotFound):
        sv.get_childspec(sup, "a")
    b = sv.start_child(sup, spec("b", None))
    assert b.call("x") == ("b", "x")
    plan: queue.Queue = queue.Queue()
    plan.put("fail")
    with pytest.raises(sv.StartError) as err:
        sv.start_child(sup, ChildSpec("bad", (Gated, (None, "bad", plan))))
    assert err.value.child_id == "bad"


def test_bad_spec_is_rejected_naming_the_field():
    with pytest.raises(sv.InvalidChildSpec) as info:
        ChildSpec("x", (Worker, ()), restart="sometimes")
    assert "restart" in str(info.value) and "sometimes" in str(info.value)
    with pytest.raises(sv.InvalidSupFlags):
        SupFlags(strategy="one_for_some")


# -- significant children ---------------------------------------------------------------------


@pytest.mark.parametrize("mode,stop_both", [("any_significant", False), ("all_significant", True)])
def test_auto_shutdown(node, mode, stop_both):
    sup = sv.start_supervisor(
        node,
        SupFlags(auto_shutdown=mode),
        [spec("s1", None, "transient", significant=True), spec("s2", None, "transient", significant=True)],
    )
    mon = node.monitor(sup)
    assert child_ref(sup, "s1").call("stop_normal") == "ok"
    if stop_both:
        # Bounded: until the supervisor has handled s1's exit; it must then still run.
        for _ in range(2000):
            if sv.which_children(sup)[0].child is None:
                break
        else:
            raise AssertionError("s1's normal exit never reached the supervisor")
        assert sup.is_alive()
        assert sv.count_children(sup)["active"] == 1
        assert child_ref(sup, "s2").call("stop_normal") == "ok"
    assert mon.wait(5) == (sup, "shutdown")


# -- reports and class-based trees ------------------------------------------------------------


def test_failures_are_logged_normal_exits_are_not_errors(node, caplog):
    caplog.set_level(logging.INFO, logger="supervision")
    sup = sv.start_supervisor(node, SupFlags(intensity=5), [spec("t", None, "transient")], name="sup1")
    old = child_ref(sup, "t")
    crash(old)
    new = wait_replaced(sup, "t", old)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.name == "supervision"]
    assert errors and errors[0].child_id == "t" and errors[0].supervisor == "sup1"
    assert errors[0].action == "restarting"
    caplog.clear()
    mon = node.monitor(new)
    new.call("stop_normal")
    mon.wait(5)
    sv.which_children(sup)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR and r.name == "supervision"]


def test_supervisor_subclass_tree(node):
    class Tree(sv.Supervisor):
        def init(self, q):
            return SupFlags("one_for_one"), [spec("x", q), spec("y", q)]

    q: queue.Queue = queue.Queue()
    sup = node.spawn(Tree, q, name="tree")
    assert [r.id for r in sv.which_children(sup)] == ["x", "y"]
    node.stop(sup, "shutdown")
    assert drain(q)[-2:] == [("terminate", "y"), ("terminate", "x")]


def test_supervisor_in_host_process_with_children_elsewhere(node):
    sup = sv.start_supervisor(
        node,
        SupFlags(intensity=5),
        [ChildSpec("a", (Worker, (None, "a")), host="own"), ChildSpec("b", (Worker, (None, "b")))],
        host="suphost",
    )
    a, b = child_ref(sup, "a"), child_ref(sup, "b")
    assert a.os_pid != b.os_pid == sup.os_pid
    os.kill(a.os_pid, signal.SIGKILL)
    assert wait_replaced(sup, "a", a).call("q") == ("a", "q")


def test_named_child_is_registered_again_after_restart(node):
    sup = sv.start_supervisor(
        node, SupFlags(intensity=5), [ChildSpec("n", (Worker, (None, "n")), name="named_worker", host="own")]
    )
    old = node.whereis("named_worker")
    assert old == child_ref(sup, "n")
    os.kill(old.os_pid, signal.SIGKILL)
    new = wait_replaced(sup, "n", old)
    assert node.whereis("named_worker") == new


def test_simple_one_for_one_failed_restart_is_retried(node):
    q: queue.Queue = queue.Queue()
    plan: queue.Queue = queue.Queue()
    sup = sv.start_supervisor(
        node, SupFlags("simple_one_for_one", intensity=5, period=30), [ChildSpec("g", (Gated, (q,)))]
    )
    r1 = sv.start_child(sup, ["g1", plan])
    plan.put("fail")  # the first restart fails, the retry succeeds
    crash(r1)
    for _ in range(2000):
        rows = sv.which_children(sup)
        if rows and isinstance(rows[0].child, type(r1)) and rows[0].child != r1:
            break
    assert rows[0].child != r1 and rows[0].child.call("x") == ("g1", "x")
    assert plan.empty()
