"""How long until a lost node is known lost, and until a restarted one is back.

Node a lives in this process; node b is `bench/_node_peer.py` in its
own OS process on 127.0.0.1 with a real cluster key (CurveZMQ on).  Rows:

- SIGKILL of b -> ``nodedown`` on a (the tcp connection drops);
- SIGSTOP of b -> ``nodedown`` on a, for each ``--ticktimes`` value
  (silence past net_ticktime; expected between 3/4 and 1x the ticktime);
- b restarted at its address -> connected again, a having b as a seed
  (the seed dialer's back-off and ZeroMQ's re-dial).

Run: python bench/_node_loss.py [--rounds 5] [--ticktimes 1,2,4]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time

from _netkit import NodeProcess

from actors import Node
from actors.cluster_key import write_new


def _row(label: str, samples: list[float]) -> None:
    ms = sorted(s * 1000.0 for s in samples)
    print(
        f"{label:<44} n={len(ms):<3} min {ms[0]:8.1f} ms  median {statistics.median(ms):8.1f} ms  max {ms[-1]:8.1f} ms"
    )


def kill_rows(key: str, rounds: int) -> None:
    samples = []
    with Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key) as node:
        for _ in range(rounds):
            b = NodeProcess("b", key)
            try:
                node.connect(b.address)
                down = node.monitor_node("b")
                t0 = time.monotonic()
                b.kill()
                down.wait(30.0)
                samples.append(time.monotonic() - t0)
            finally:
                b.close()
    _row("SIGKILL -> nodedown (net_ticktime 15)", samples)


def stop_rows(key: str, rounds: int, ticktime: float) -> None:
    samples = []
    with Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key, net_ticktime=ticktime) as node:
        for _ in range(rounds):
            b = NodeProcess("b", key, ticktime=ticktime)
            try:
                node.connect(b.address)
                down = node.monitor_node("b")
                t0 = time.monotonic()
                b.signal(signal.SIGSTOP)
                down.wait(30.0 + 2 * ticktime)
                samples.append(time.monotonic() - t0)
            finally:
                b.close()  # continues it first
    _row(f"SIGSTOP -> nodedown (net_ticktime {ticktime:g})", samples)


def rejoin_rows(key: str, rounds: int) -> None:
    samples = []
    b = NodeProcess("b", key)
    try:
        with Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key, seeds=[b.address]) as node:
            for _ in range(rounds):
                down = node.monitor_node("b")
                b.kill()
                down.wait(30.0)
                b.close()
                b = NodeProcess("b", key, port=b.port)
                started = time.monotonic()  # b prints its address once it listens
                if not node.wait_for_node("b", timeout=30.0):
                    raise SystemExit("b did not come back within 30 s")
                samples.append(time.monotonic() - started)
    finally:
        b.close()
    _row("restarted seed listening -> connected again", samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ticktimes", default="1,2,4")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f} at start")
    with tempfile.TemporaryDirectory() as tmp:
        key = os.path.join(tmp, "cluster.key")
        write_new(key)
        kill_rows(key, args.rounds)
        for tick in (float(t) for t in args.ticktimes.split(",") if t):
            stop_rows(key, args.rounds, tick)
        rejoin_rows(key, args.rounds)
    print(f"load average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
