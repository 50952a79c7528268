"""A distributed node in its own OS process, driven by the tests over stdin/stdout.

Prints ``ADDR <address>`` once listening, then serves until stdin closes
(so it never outlives the test that started it).  Commands, one a line:
``connect ADDR`` (prints ``CONNECTED <name>`` or ``CONNECT_FAILED <error>``),
``spawn NAME`` (a `Worker` in a host process of its own, registered as NAME;
prints ``SPAWNED NAME``), ``wait_for NAME`` (prints ``WAITED True`` once
NAME is connected), ``wait_down NAME`` (prints ``DOWN nodedown`` once NAME
is not connected), ``nodes`` (prints ``NODES a,b``), ``couch_jobs URL
[KEY=VALUE ...]`` (starts couch_jobs on the store at URL with those
``[couch_jobs]`` settings; prints ``COUCH_JOBS started``, and stops it
before the node closes).
"""

from __future__ import annotations

import argparse
import sys

from actors import Node
from actors._net import NetError
from actors.couch_jobs import app

from tests.cluster.dist_actors import Worker


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--key", default=None)
    parser.add_argument("--ticktime", type=float, default=15.0)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", action="append", default=[])
    args = parser.parse_args()
    couch_jobs_started = False
    with Node(name=args.name, listen=f"tcp://127.0.0.1:{args.port}", cluster_key=args.key,
              net_ticktime=args.ticktime, seeds=args.seed) as node:
        say(f"ADDR {node.address}")
        try:
            for line in sys.stdin:
                words = line.split()
                if not words:
                    continue
                if words[0] == "connect":
                    try:
                        say(f"CONNECTED {node.connect(words[1], timeout=5.0)}")
                    except NetError as exc:
                        say(f"CONNECT_FAILED {exc}")
                elif words[0] == "spawn":
                    node.spawn(Worker, words[1], name=words[1], host="own")
                    say(f"SPAWNED {words[1]}")
                elif words[0] == "wait_for":
                    say(f"WAITED {node.wait_for_node(words[1], timeout=10.0)}")
                elif words[0] == "wait_down":
                    try:
                        say(f"DOWN {node.monitor_node(words[1]).wait(10.0)[0]}")
                    except TimeoutError:
                        say("DOWN timeout")
                elif words[0] == "nodes":
                    say(f"NODES {','.join(node.nodes())}")
                elif words[0] == "couch_jobs":
                    for setting in words[2:]:
                        key, _, value = setting.partition("=")
                        node.config.set("couch_jobs", key, value)
                    app.start(node, words[1])
                    couch_jobs_started = True
                    say("COUCH_JOBS started")
        finally:
            if couch_jobs_started:
                app.stop(node)
    return 0


if __name__ == "__main__":
    sys.exit(main())
