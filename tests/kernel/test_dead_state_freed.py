"""A dead actor's state is freed when its thread ends, not at the cyclic collector's leisure.

A behaviour and its cell point at each other; left so, the state of every
killed incarnation (an open file, a big table) would wait for a full
collection, which in a long-lived heap runs rarely: a node restarting a
worker with a megabyte of state grew by 45 MB in 300 restarts.  With the
collector switched off, the state must still go.
"""

from __future__ import annotations

import gc
import queue
import weakref
from typing import Any

import pytest

from actors import GenServer
from tests.polling import poll_until

pytestmark = pytest.mark.timeout(60)


class State:
    """Something weakly referenceable that only the actor holds."""


class Holder(GenServer):
    def init(self, out: "queue.Queue[Any]") -> None:
        self.state = State()
        out.put(weakref.ref(self.state))

    def handle_call(self, request: Any, from_: Any) -> Any:
        return request


@pytest.mark.parametrize("how", ["kill", "stop", "crash"])
def test_state_of_a_dead_actor_is_freed_without_the_cyclic_collector(node, how):
    out: "queue.Queue[Any]" = queue.Queue()
    gc.collect()
    gc.disable()
    try:
        ref = node.spawn(Holder, out)
        state = out.get(timeout=10)
        assert state() is not None
        mon = node.monitor(ref)
        if how == "kill":
            node.kill(ref)
        elif how == "stop":
            node.stop(ref, timeout=10)
        else:
            node.exit(ref, "boom")
        assert mon.wait(10) is not None
        poll_until(lambda: state() is None, "the dead actor's state to be freed", seconds=10)
    finally:
        gc.enable()
