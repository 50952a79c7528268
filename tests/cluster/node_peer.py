"""A distributed node in its own OS process, driven by the tests over stdin/stdout.

Prints ``ADDR <address>`` once listening, then serves until stdin closes
(so it never outlives the test that started it); with ``--rejoin`` an
incarnation that ends is followed by a new one (prints ``REJOINED <node id>``).  Commands, one a line:
``connect ADDR`` (prints ``CONNECTED <name>`` or ``CONNECT_FAILED <error>``),
``spawn NAME`` (a `Worker` in a host process of its own, registered as NAME;
prints ``SPAWNED NAME``), ``wait_for NAME`` (prints ``WAITED True`` once
NAME is connected), ``wait_down NAME`` (prints ``DOWN nodedown`` once NAME
is not connected), ``nodes`` (prints ``NODES a,b``), ``couch_jobs URL
[KEY=VALUE ...]`` (starts couch_jobs on the store at URL with those
``[couch_jobs]`` settings; prints ``COUCH_JOBS started``, and stops it
before the node closes), ``groups_start`` (starts this node's pg scope and
global name server; prints ``GROUPS started``), ``gregister NAME`` (a
`Member`, registered locally as NAME, takes the global NAME: prints
``GREGISTERED NAME True|False``, then ``GEXIT NAME <reason>`` once it dies),
``gwhereis NAME`` (prints ``GWHEREIS NAME <node of the holder>|None``).
"""

from __future__ import annotations

import argparse
import sys
import threading

from actors import IncarnationEnded, Node, global_names, pg
from actors._core.net.net import NetError
from actors.couch_jobs import app
from tests.cluster.dist_actors import Worker
from tests.cluster.group_actors import Member
from tests.cluster.peer_loop import connect_command, say, serve


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--key", default=None)
    parser.add_argument("--ticktime", type=float, default=15.0)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", action="append", default=[])
    parser.add_argument("--rejoin", action="store_true", help="start a new incarnation in place after one ends")
    args = parser.parse_args()
    couch_jobs_started = False
    with Node(
        name=args.name,
        listen=f"tcp://127.0.0.1:{args.port}",
        cluster_key=args.key,
        net_ticktime=args.ticktime,
        seeds=args.seed,
        rejoin=(lambda node: say(f"REJOINED {node.id}")) if args.rejoin else None,
    ) as node:

        def spawn(words: list[str]) -> None:
            node.spawn(Worker, words[0], name=words[0], host="own")
            say(f"SPAWNED {words[0]}")

        def wait_down(words: list[str]) -> None:
            try:
                say(f"DOWN {node.monitor_node(words[0]).wait(10.0)[0]}")
            except TimeoutError:
                say("DOWN timeout")

        def start_couch_jobs(words: list[str]) -> None:
            nonlocal couch_jobs_started
            for setting in words[1:]:
                key, _, value = setting.partition("=")
                node.config.set("couch_jobs", key, value)
            app.start(node, words[0])
            couch_jobs_started = True
            say("COUCH_JOBS started")

        def groups_start(words: list[str]) -> None:
            pg.start(node)
            global_names.start(node)
            say("GROUPS started")

        def gregister(words: list[str]) -> None:
            name = words[0]
            member = node.spawn(Member, name, name=name, host="own")
            watch = node.monitor(member)
            say(f"GREGISTERED {name} {global_names.register(name, member)}")

            def report() -> None:
                try:
                    say(f"GEXIT {name} {watch.wait(60.0)[1]!r}")
                except TimeoutError:
                    pass

            threading.Thread(target=report, daemon=True).start()

        def gwhereis(words: list[str]) -> None:
            holder = global_names.whereis(words[0])
            say(f"GWHEREIS {words[0]} {holder.node_id.partition('@')[0] if holder else None}")

        say(f"ADDR {node.address}")
        try:
            serve(
                {
                    "connect": connect_command(node.connect, 5.0, (NetError, IncarnationEnded)),
                    "spawn": spawn,
                    "wait_for": lambda words: say(f"WAITED {node.wait_for_node(words[0], timeout=10.0)}"),
                    "wait_down": wait_down,
                    "nodes": lambda words: say(f"NODES {','.join(node.nodes())}"),
                    "couch_jobs": start_couch_jobs,
                    "groups_start": groups_start,
                    "gregister": gregister,
                    "gwhereis": gwhereis,
                }
            )
        finally:
            if couch_jobs_started:
                app.stop(node)
    return 0


if __name__ == "__main__":
    sys.exit(main())
