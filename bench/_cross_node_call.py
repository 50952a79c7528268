"""Cross-node call round trip (first figures for issue 12; the bench/messaging.py row is still to come).

Run: PYTHONPATH=$PWD python bench/_cross_node_call.py  (node b is tests/cluster/node_peer.py, loopback, no key)
"""
import os, statistics, subprocess, sys, time
from actors import Node
from tests.cluster.dist_actors import Worker
if __name__ == "__main__":
    env = dict(os.environ)
    p = subprocess.Popen([sys.executable, "tests/cluster/node_peer.py", "--name", "b"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    addr = p.stdout.readline().split()[1]
    try:
        with Node(name="a", listen="tcp://127.0.0.1:0") as n:
            n.connect(addr)
            for where in ("b-node-process", "b-host"):
                w = n.spawn(Worker, node="b", host=None if where == "b-node-process" else "own")
                for _ in range(300): w.call(("echo", 1))
                ts = []
                for _ in range(2000):
                    t = time.perf_counter(); w.call(("echo", 1)); ts.append(time.perf_counter() - t)
                print(f"a host program -> actor in {where}: call p50 {statistics.median(ts)*1e6:.0f} us p99 {sorted(ts)[1979]*1e6:.0f} us")
    finally:
        p.stdin.close(); p.wait(20)
