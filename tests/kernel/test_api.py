"""Process-level API (any process) and the exported names of the package."""

from __future__ import annotations

import pytest

import actors
from actors import Exit, GenServer
from tests.kernel.probes import Echo

pytestmark = pytest.mark.timeout(30)


class Finder(GenServer):
    """Runs in a host process: uses the process-level API, which has no Node."""

    def handle_call(self, request, from_):
        op, *args = request
        if op == "whereis":
            return actors.whereis(args[0])
        if op == "call":
            try:
                return actors.call(args[0], args[1])
            except Exit as exc:
                return ("exit", exc.reason)
        if op == "monitor":
            return actors.monitor(args[0]).wait(5)
        if op == "node_id":
            return actors.api.node_id()
        raise ValueError(op)


def test_process_level_api_from_a_host(node):
    echo = node.spawn(Echo, name="echo", host="one")
    finder = node.spawn(Finder, host="two")
    assert finder.call(("whereis", "echo")) == echo
    assert finder.call(("call", "echo", "hi")) == "hi"
    assert finder.call(("call", "nobody", "hi")) == ("exit", "noproc")
    mon = node.monitor(echo)
    node.kill(echo)
    mon.wait(5)
    assert finder.call(("monitor", echo)) == (echo, "noproc")
    assert finder.call(("node_id",)) == node.id == actors.api.node_id()


def test_process_level_api_in_the_host_program(node):
    echo = node.spawn(Echo, name="echo")
    assert actors.whereis("echo") == echo
    assert actors.call("echo", 1) == 1
    mon = actors.monitor(echo)
    node.stop(echo)
    assert mon.wait(5) == (echo, "normal")
    with pytest.raises(Exit) as info:
        actors.call("echo", 1)
    assert info.value.reason == "noproc"


def test_exported_names_are_pinned():
    assert sorted(actors.__all__) == sorted(
        [
            "ActorRef",
            "AlreadyRegistered",
            "CallCycle",
            "CallTimeout",
            "Config",
            "ConnectError",
            "Continue",
            "Crash",
            "Exit",
            "From",
            "GenServer",
            "GenStatem",
            "INCARNATION_ENDED",
            "IncarnationEnded",
            "MailboxFull",
            "Monitor",
            "NetError",
            "Node",
            "SpawnError",
            "Stop",
            "Timeout",
            "Timer",
            "UnexpectedMessage",
            "call",
            "cast",
            "ignore",
            "is_normal_exit",
            "monitor",
            "noreply",
            "run_forever",
            "send",
            "whereis",
        ]
    )
    for name in actors.__all__:
        assert hasattr(actors, name)


def test_messages_with_refs_and_local_classes_cross_processes(node):
    class Local:
        def __init__(self, x):
            self.x = x

        def __eq__(self, other):
            return isinstance(other, Local) and other.x == self.x

    echo = node.spawn(Echo, host="own")
    assert echo.call(("ref", echo)) == ("ref", echo)
    assert echo.call(Local(3)) == Local(3)
    assert echo.call(lambda: 1)() == 1


class SelfNaming(GenServer):
    def init(self, name):
        self.register(name)

    def handle_call(self, request, from_):
        try:
            self.register(request)
        except Exit as exc:
            return exc.reason
        return "ok"


def test_actor_registers_itself_and_the_name_is_released_on_death(node):
    a = node.spawn(SelfNaming, "self_named", host="own")
    assert node.whereis("self_named") == a
    assert a.call("self_named") == "ok"  # same name again: a no-op
    assert a.call("other")[0] == "already_named"
    b = node.spawn(Echo, name="taken")
    c = node.spawn(SelfNaming, "c_named")
    assert c.call("taken") == ("already_named", "c_named")
    mon = node.monitor(a)
    node.kill(a)
    mon.wait(5)
    assert node.whereis("self_named") is None
    again = node.spawn(SelfNaming, "self_named")
    assert again != a and again.is_alive()
    assert node.whereis("self_named") == again
    assert b.is_alive()
