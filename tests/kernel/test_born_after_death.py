"""A host process started after another one died knows that one is dead.

The node tells the hosts that are up when a host dies; a host forked later
(a restart's fresh process) used to know nothing of it, so a monitor or a
call from there to an actor of the dead host was sent to a socket nobody
reads and waited for its whole timeout (10 s for a monitor) instead of
getting ``noproc`` at once.  Under kills that is how IOQ froze: a restarted
IOQ server monitoring a file actor of a SIGKILLed host blocked 10 s per
request and its callers timed out.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.kernel.probes import Echo

pytestmark = pytest.mark.timeout(60)


def test_host_started_after_a_death_gets_noproc_at_once(node):
    dead = node.spawn(Echo, host="doomed")
    mon = node.monitor(dead)
    os.kill(dead.os_pid, signal.SIGKILL)
    assert mon.wait(10) == (dead, "killed")
    # More hosts than the node keeps spares: the last ones are forked after the death.
    born_after = [node.spawn(Echo, host=f"later{i}") for i in range(4)]
    for b in born_after:
        t0 = time.monotonic()
        mref = b.call(("monitor", dead), timeout=30)
        took = time.monotonic() - t0
        assert took < 3.0, f"monitor from {b!r} took {took:.1f} s (the dead host was unknown there)"
        # The DOWN was queued to the actor before its reply to the monitor call left.
        assert b.call("seen") == [("DOWN", mref, dead, "noproc")]
