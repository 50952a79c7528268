"""Places where the supervisor once differed from OTP's documented ``supervisor``.

Each test names the OTP rule it holds us to (supervisor.erl, stdlib docs).
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import pytest

import supervision as sv
from actors import Exit, ignore
from supervision import ChildSpec, Supervisor, SupFlags, start_supervisor
from tests.polling import poll_until
from tests.supervision.workers import Worker

pytestmark = pytest.mark.timeout(40)


def spec(cid: Any, restart: str = "permanent", **kw: Any) -> ChildSpec:
    return ChildSpec(cid, (Worker, (None, cid)), restart=restart, **kw)


# -- child specs (no processes) ----------------------------------------------------------


def test_check_childspecs_is_public_and_skips_auto_shutdown_unless_given() -> None:
    # OTP check_childspecs/1 is check_childspecs(Specs, undefined): a significant
    # transient child is valid there; only an explicit `never` refuses it.
    significant = spec("s", "transient", significant=True)
    assert sv.check_childspecs([significant]) == (significant,)
    with pytest.raises(sv.InvalidChildSpec) as info:
        sv.check_childspecs([significant], "never")
    assert info.value.field == "significant"
    with pytest.raises(sv.InvalidChildSpec):
        sv.check_childspecs([spec("a"), spec("a")])


def test_old_six_tuple_and_modules_key() -> None:
    # OTP's tuple format is {Id, Start, Restart, Shutdown, Type, Modules}, and
    # `modules` is a key of the map format.
    six = ChildSpec.from_map(("t", (Worker, (None, "t")), "transient", 2, "worker", ["Worker"]))
    assert (six.id, six.restart, six.shutdown, six.module_names) == ("t", "transient", 2, ["Worker"])
    dynamic = ChildSpec.from_map({"id": "d", "start": (Worker, ()), "modules": "dynamic"})
    assert dynamic.module_names == "dynamic"
    assert ChildSpec("c", (Worker, ()), modules=[Worker]).module_names == ["Worker"]
    assert spec("x").module_names == ["Worker"]  # OTP default [M]
    with pytest.raises(sv.InvalidChildSpec) as info:
        ChildSpec("bad", (Worker, ()), modules=[3])
    assert info.value.field == "modules"


def test_node_and_modules_survive_the_map_round_trip_and_extra_args() -> None:
    # simple_one_for_one's start_child builds each child from the template;
    # the template's node (and modules) must not be lost on the way.
    template = ChildSpec("w", (Worker, (None,)), node=("a@h", "b@h"), modules=["Worker"])
    assert ChildSpec.from_map(template.to_map()) == template
    child = template.with_args(("t1",))
    assert child.node == ("a@h", "b@h") and child.modules == ("Worker",)
    assert child.start_args == (None, "t1")


# -- start_child --------------------------------------------------------------------------


def test_start_child_refuses_a_significant_child_when_auto_shutdown_is_never(node):
    # OTP: start_child runs check_childspec(Spec, AutoShutdown) -> bad_combination.
    sup = sv.start_supervisor(node, SupFlags(), [spec("a")])
    with pytest.raises(sv.InvalidChildSpec) as info:
        sv.start_child(sup, spec("s", "transient", significant=True))
    assert info.value.field == "significant"
    assert [row.id for row in sv.which_children(sup)] == ["a"]
    assert (
        sv.start_child(
            sv.start_supervisor(node, SupFlags(auto_shutdown="any_significant"), []),
            spec("s", "transient", significant=True),
        )
        is not None
    )


def test_start_child_whose_name_is_taken_is_already_started(node):
    # OTP passes a start function's {error, {already_started, Pid}} on as it is.
    holder = node.spawn(Worker, None, "holder", name="taken_name")
    sup = sv.start_supervisor(node, SupFlags(), [])
    with pytest.raises(sv.AlreadyStarted) as info:
        sv.start_child(sup, spec("n", name="taken_name"))
    assert info.value.ref == holder
    assert sv.which_children(sup) == []  # the spec is discarded
    pool = sv.start_supervisor(
        node, SupFlags("simple_one_for_one"), [ChildSpec("w", (Worker, (None,)), name="taken_name")]
    )
    with pytest.raises(sv.AlreadyStarted) as info:
        sv.start_child(pool, ["w1"])
    assert info.value.ref == holder


def test_start_supervisor_whose_name_is_taken_is_already_started(node):
    # OTP start_link({local, Name}, ...) of a taken name: {error, {already_started, Pid}}.
    first = sv.start_supervisor(node, SupFlags(), [], name="sup_name")
    with pytest.raises(sv.AlreadyStarted) as info:
        sv.start_supervisor(node, SupFlags(), [spec("a")], name="sup_name")
    assert info.value.ref == first


def test_which_children_shows_the_specs_modules(node):
    sup = sv.start_supervisor(node, SupFlags(), [spec("a", modules=["worker_mod"]), spec("b")])
    assert [row.modules for row in sv.which_children(sup)] == [["worker_mod"], ["Worker"]]


# -- simple_one_for_one ---------------------------------------------------------------------


@pytest.mark.parametrize("restart", ["transient", "temporary"])
def test_simple_one_for_one_any_significant_shuts_down(node, restart):
    sup = sv.start_supervisor(
        node,
        SupFlags("simple_one_for_one", auto_shutdown="any_significant"),
        [ChildSpec("w", (Worker, (None,)), restart=restart, significant=True)],
    )
    first, second = sv.start_child(sup, ["w1"]), sv.start_child(sup, ["w2"])
    watch_sup, watch_second = node.monitor(sup), node.monitor(second)
    assert first.call("stop_normal") == "ok"
    assert watch_sup.wait(10) == (sup, "shutdown")
    assert watch_second.wait(10) == (second, "shutdown")  # its other children are stopped


def test_simple_one_for_one_all_significant_waits_for_the_last_child(node):
    sup = sv.start_supervisor(
        node,
        SupFlags("simple_one_for_one", auto_shutdown="all_significant"),
        [ChildSpec("w", (Worker, (None,)), restart="transient", significant=True)],
    )
    first, second = sv.start_child(sup, ["w1"]), sv.start_child(sup, ["w2"])
    watch = node.monitor(sup)
    assert first.call("stop_normal") == "ok"
    poll_until(lambda: sv.count_children(sup)["workers"] == 1, "w1's exit handled")
    assert sup.is_alive()
    assert second.call("stop_normal") == "ok"
    assert watch.wait(10) == (sup, "shutdown")


def test_simple_one_for_one_never_is_not_shut_down_by_exits(node):
    sup = sv.start_supervisor(
        node, SupFlags("simple_one_for_one"), [ChildSpec("w", (Worker, (None,)), restart="transient")]
    )
    only = sv.start_child(sup, ["w1"])
    assert only.call("stop_normal") == "ok"
    poll_until(lambda: sv.count_children(sup)["workers"] == 0, "w1's exit handled")
    assert sup.is_alive() and sv.start_child(sup, ["w2"]) is not None


def test_simple_one_for_one_terminate_child_by_ref(node):
    # OTP: the pid of a dead process is ok (nothing left to terminate); the pid
    # of a live process that is not a child is {error, not_found}.
    sup = sv.start_supervisor(node, SupFlags("simple_one_for_one"), [ChildSpec("w", (Worker, (None,)))])
    child = sv.start_child(sup, ["w1"])
    sv.terminate_child(sup, child)
    assert sv.which_children(sup) == []
    assert sv.terminate_child(sup, child) is None
    stranger = node.spawn(Worker, None, "stranger")
    with pytest.raises(sv.NotFound):
        sv.terminate_child(sup, stranger)
    assert stranger.is_alive()


def test_simple_one_for_one_get_childspec(node):
    # OTP find_child: the template's id, a child's pid or a dead pid give the template.
    template = ChildSpec("w", (Worker, (None,)))
    sup = sv.start_supervisor(node, SupFlags("simple_one_for_one"), [template])
    child = sv.start_child(sup, ["w1"])
    assert sv.get_childspec(sup, "w") == template
    assert sv.get_childspec(sup, child) == template
    sv.terminate_child(sup, child)
    assert sv.get_childspec(sup, child) == template
    with pytest.raises(sv.NotFound):
        sv.get_childspec(sup, "other")
    with pytest.raises(sv.NotFound):
        sv.get_childspec(sup, node.spawn(Worker, None, "stranger"))


class Refusing(Worker):
    """Starts once; every later start fails until ``ALLOW`` is set. ``TRIES`` counts the starts."""

    ALLOW = threading.Event()
    TRIES: "queue.Queue[str]" = queue.Queue()

    def init(self, q: Any, tag: str) -> None:
        Refusing.TRIES.put(tag)
        if Refusing.TRIES.qsize() > 1 and not Refusing.ALLOW.is_set():
            raise RuntimeError("refused")
        super().init(q, tag)


def test_simple_one_for_one_terminate_child_ends_a_restart_being_retried(node):
    # OTP: terminate_child(Sup, OldPid) of a child being restarted erases it,
    # so the retries stop and the supervisor has no child left.
    Refusing.ALLOW.clear()
    Refusing.TRIES = queue.Queue()
    sup = sv.start_supervisor(
        node, SupFlags("simple_one_for_one", intensity=1_000_000, period=5), [ChildSpec("r", (Refusing, (None,)))]
    )
    child = sv.start_child(sup, ["first"])
    with pytest.raises(Exit):
        child.call("crash")  # its restarts now fail until ALLOW
    poll_until(lambda: [row.child for row in sv.which_children(sup)] == ["restarting"], "a failing restart")
    assert sv.terminate_child(sup, child) is None
    assert sv.which_children(sup) == []
    before = Refusing.TRIES.qsize()
    assert sv.count_children(sup) == {"specs": 1, "active": 0, "supervisors": 0, "workers": 0}
    assert Refusing.TRIES.qsize() == before  # no retry ran after terminate_child
    Refusing.ALLOW.set()
    assert sv.which_children(sup) == [] and sup.is_alive()


class IgnoringSupervisor(Supervisor):
    """A supervisor module whose ``init`` returns ``ignore``."""

    def init(self, *args: Any) -> Any:
        return ignore


def test_start_supervisor_whose_init_ignores_gives_none(node):
    """OTP: ``supervisor:start_link`` returns ``ignore`` and nothing runs."""
    before = set(node.registered())
    assert start_supervisor(node, SupFlags("one_for_one"), [], name="ignoring_sup", cls=IgnoringSupervisor) is None
    assert node.whereis("ignoring_sup") is None
    assert set(node.registered()) == before
