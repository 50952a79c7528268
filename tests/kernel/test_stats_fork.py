"""`Node.stats` sums every process of the node: counts the node process made
before the node started must be counted once, not once per host.

The zygote is forked from a single-threaded program, so it starts with a copy
of that program's counters; a host that reported the copy made the sum grow
with every spare that came up (which made a drop-counting test flaky).
"""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(60)

SCRIPT = textwrap.dedent("""
    import threading
    from actors import Node, stats
    from actors.gen_server import GenServer

    class Echo(GenServer):
        def handle_call(self, request, from_):
            return request

    assert threading.active_count() == 1  # so the zygote is forked, not spawned
    stats.current().increment("test.before_node", 5)
    with Node() as node:
        refs = [node.spawn(Echo, host="own") for _ in range(3)]
        assert all(r.call(i) == i for i, r in enumerate(refs))
        assert len([h for h in node.hosts() if h["state"] == "up"]) >= 3
        print(node.stats()["counters"].get("test.before_node"))
""")


def test_counts_made_before_the_node_started_are_counted_once():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=50)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["5"]
