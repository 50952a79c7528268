"""A service that registers itself in ``init`` survives the kill of the
supervisor above it: the supervisor's parent restarts that supervisor while
the previous service is still running ``terminate`` (it traps exits, so its
parent's death reaches it as a message), and the new service waits for the
name (`GenServer.register`'s ``wait``) instead of failing start after start
until the restart intensity is used up."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import supervision as sv
from actors import ActorRef, Exit, GenServer, SpawnError
from supervision import ChildSpec, SupFlags
from tests.polling import poll_until

pytestmark = pytest.mark.timeout(60)

NAME = "handover_service"
#: Set by the test, read by the services: they live in this process (host=None).
IN_TERMINATE = threading.Event()
REGISTERING_AGAIN = threading.Event()
LEAVE = threading.Event()
INITS: list[Any] = []  # every incarnation's ref, in the order their init ran


class Service(GenServer):
    """Registers itself; its first incarnation lingers in terminate until told to leave."""

    def init(self, wait: float) -> None:
        self.trap_exit = True
        INITS.append(self.ref)
        self.first = len(INITS) == 1
        if not self.first:
            REGISTERING_AGAIN.set()
        self.register(NAME, wait=wait)

    def handle_call(self, request: Any, from_: Any) -> Any:
        return "here"

    def terminate(self, reason: Any) -> None:
        if self.first:
            IN_TERMINATE.set()
            assert LEAVE.wait(30), "the test never let the old service go"


def _tree(node: Any, wait: float) -> Any:
    inner = ChildSpec(
        "inner",
        (sv._supervisor._StaticSupervisor, (SupFlags(intensity=3, period=10), [ChildSpec("svc", (Service, (wait,)))])),
        type="supervisor",
    )
    return sv.start_supervisor(node, SupFlags(intensity=3, period=10), [inner])


@pytest.fixture(autouse=True)
def _fresh_events(node):  # after the node is up, before it closes: no service left waiting
    IN_TERMINATE.clear()
    REGISTERING_AGAIN.clear()
    LEAVE.clear()
    INITS.clear()
    yield
    LEAVE.set()


def _inner(top: Any) -> Any:
    return next(r.child for r in sv.which_children(top) if r.id == "inner")


def test_a_restarted_service_waits_for_its_previous_incarnation_to_give_the_name_back(node, caplog):
    top = _tree(node, wait=20.0)
    old_service = node.whereis(NAME)
    old_inner = _inner(top)
    watch = node.monitor(old_inner)
    node.kill(old_inner)
    assert watch.wait(10)[1] == "killed"
    assert IN_TERMINATE.wait(10), "the old service never heard of its supervisor's death"
    assert REGISTERING_AGAIN.wait(10), "top never restarted inner"
    assert node.whereis(NAME) == old_service  # still in its terminate, whichever came first
    LEAVE.set()
    new_inner = poll_until(
        lambda: (lambda r: r if isinstance(r, ActorRef) and r != old_inner else None)(_inner(top)), "inner restarted"
    )
    assert top.is_alive() and new_inner.is_alive()
    new_service = node.whereis(NAME)
    assert new_service is not None and new_service != old_service
    assert new_service.call("ping") == "here"
    assert not [r for r in caplog.records if "start_error" in r.getMessage()], "a start failed on the name"


def test_a_name_held_by_a_live_actor_still_fails_after_the_wait(node):
    holder = node.spawn(Service, 0.0)
    with pytest.raises(SpawnError) as err:
        node.spawn(Service, 0.2)
    assert err.value.reason[0] == "already_registered" and err.value.reason[1] == holder
    assert node.whereis(NAME) == holder and holder.call("ping") == "here"
    LEAVE.set()
    node.stop(holder)
    with pytest.raises(Exit):
        holder.call("ping", timeout=5)
