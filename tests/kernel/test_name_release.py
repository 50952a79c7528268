"""A dead actor's registered name is released before its death is heard.

In Erlang a process's name goes with its termination, before its exit
signals and DOWNs are delivered, so a supervisor that gets the EXIT of a
killed named child can always register the name again when it restarts it.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

import supervision as sv
from actors import Exit, GenServer
from supervision import ChildSpec, SupFlags
from tests.polling import poll_until

pytestmark = pytest.mark.timeout(60)

ROUNDS = 15


class SelfNamed(GenServer):
    """Registers itself in ``init`` (as smoosh_server does), or on request."""

    def init(self, name: str | None = None) -> None:
        if name is not None:
            self.register(name)

    def handle_call(self, request: Any, from_: Any) -> Any:
        if isinstance(request, tuple) and request[0] == "register":
            self.register(request[1])
            return "registered"
        return request


def _child(sup: Any, cid: str) -> Any:
    for row in sv.which_children(sup):
        if row.id == cid:
            return row.child
    raise KeyError(cid)


def _replaced(sup: Any, cid: str, old: Any) -> Any:
    """Until ``which_children`` shows a new running ref for ``cid``."""

    def replaced() -> Any:
        ref = _child(sup, cid)
        return ref if ref is not None and not isinstance(ref, str) and ref != old else None

    return poll_until(replaced, f"a restart of {cid}")


def test_killed_while_its_callback_registers_a_name_releases_it_before_the_down(node):
    """The kill lands while ``register`` is in the registry: the DOWN must
    come after the name is given back (it used to stay held by the dead)."""
    rt = node._rt
    ref = node.spawn(SelfNamed)
    cell = rt.cells[ref.id]
    registry = rt.registry
    original = registry.register

    def register_while_killed(name: str, who: Any) -> Any:
        if name == "victim":
            cell.die("killed")  # the kill arrives mid-registration
        return original(name, who)

    registry.register = register_while_killed
    try:
        mon = node.monitor(ref)
        with pytest.raises(Exit):
            ref.call(("register", "victim"))
        assert mon.wait(10)[1] == "killed"
        assert node.whereis("victim") is None
    finally:
        registry.register = original
    again = node.spawn(SelfNamed, "victim")
    assert node.whereis("victim") == again


@pytest.mark.parametrize("how", ["spec_name", "init_register"])
def test_a_killed_named_child_is_restarted_under_its_name_every_time(node, how):
    if how == "spec_name":
        child = ChildSpec("c", (SelfNamed, ()), name="victim", host="named")
    else:
        child = ChildSpec("c", (SelfNamed, ("victim",)), host="named")
    sup = sv.start_supervisor(node, SupFlags(intensity=ROUNDS + 5, period=60), [child])
    try:
        ref = _child(sup, "c")
        for _ in range(ROUNDS):
            assert node.whereis("victim") == ref
            node.kill(ref)
            ref = _replaced(sup, "c", ref)
            assert ref.call("ping") == "ping"
        assert node.whereis("victim") == ref
        assert sup.is_alive()
    finally:
        node.stop(sup)


def test_a_sigkilled_host_releases_the_name_before_the_restart(node):
    child = ChildSpec("c", (SelfNamed, ("victim",)), host="own")
    sup = sv.start_supervisor(node, SupFlags(intensity=10, period=60), [child])
    try:
        ref = _child(sup, "c")
        for _ in range(3):
            os.kill(ref.os_pid, signal.SIGKILL)
            ref = _replaced(sup, "c", ref)
            assert node.whereis("victim") == ref
        assert sup.is_alive()
    finally:
        node.stop(sup)
