"""``demo --nodes N --hosts``: the cluster demo on network-namespace hosts, with network faults.

The demo builds the machines first (`actors.app.workload.netns`): a switch, a
host for the controller, one per node and a database host running
PostgreSQL (`actors.app.workload.postgres_host`), all in namespaces of its own,
removed at the end however the run ends.  The demo process moves itself onto
the controller's host (`netns.enter`) before its node starts, so every
connection it makes goes over the hosts' network; each node is
``otpy node`` started on its own host with ``ip netns exec``, listening on
the host's address with the cluster key, seeded with every other node, and
couch_jobs on the database host.  Beside the usual chaos (actors killed,
whole nodes SIGKILLed), `actors.app.workload.netchaos` cuts a node's host off
or two node hosts apart, heals, and checks that the cluster re-forms by
itself.  Root only, as namespaces are.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from actors import Node
from actors.app.demo import Outcome, run_demo
from actors.app.demo_cluster import CONTROLLER, HostsPlan, _run_cluster
from actors.app.workload.netns import Topology, enter, missing
from actors.app.workload.postgres_host import PostgresHost, postgres_host_missing
from actors.cluster_key import write_new
from actors.config import Config

__all__ = ["NET_TICKTIME", "PORT", "run_hosts_demo"]

#: Short, as a LAN allows: a cut is declared within it on both sides, and healed within 2 x it + 10 s.
NET_TICKTIME = 2.0
#: Every node listens on this port of its host's address.
PORT = 4370
#: --short runs this long on hosts: long enough for a host cut and a pair cut, each held and healed.
SHORT_DURATION = 30.0


def run_hosts_demo(args: Any, *, observe: Callable[..., Any] | None = None) -> int:
    """``demo --nodes N --hosts``: 2 (one line on stderr) where namespace hosts cannot be made,
    else `run_demo`'s exit statuses (``observe`` as there)."""
    why = missing() or postgres_host_missing()
    if why:
        print(f"error: demo --hosts: {why}", file=sys.stderr, flush=True)
        return 2
    names = [f"n{i + 1}" for i in range(int(args.nodes))]
    with Topology([CONTROLLER, *names]) as topo:
        topo.add_host("db", 100)
        pg = PostgresHost(topo["db"])
        try:
            print(
                f"hosts: {CONTROLLER} {topo[CONTROLLER].address}, "
                + ", ".join(f"{n} {topo[n].address}" for n in names)
                + f", db {topo['db'].address} (PostgreSQL); namespaces {topo.prefix}*",
                flush=True,
            )
            enter(topo[CONTROLLER].ns)  # this thread, and all it starts from now on, is on the controller's host
            args.store = pg.url
            plan = HostsPlan(
                topo,
                {n: (f"tcp://{topo[n].address}:{PORT}", topo[n].exec_prefix()) for n in names},
                net_ticktime=NET_TICKTIME,
                fault_period=1.0,
                hold=2 * NET_TICKTIME + 1.0,
                heal_limit=2 * NET_TICKTIME + 10.0 + 30.0,
            )

            def make_node(state_dir: str, metrics: int | None = None) -> Node:
                key = os.path.join(state_dir, "cluster.key")
                write_new(key)
                return Node(
                    name=CONTROLLER,
                    listen=f"tcp://{topo[CONTROLLER].address}:{PORT}",
                    cluster_key=key,
                    net_ticktime=NET_TICKTIME,
                    metrics=metrics,
                )

            def body(
                node: Node,
                cfg: Config,
                state_dir: str,
                duration: float,
                rate: float,
                grace: float,
                live: bool,
                seed: int,
                outcome: Outcome,
                *,
                short: bool,
            ) -> None:
                if short:
                    duration = max(duration, SHORT_DURATION)
                _run_cluster(
                    node,
                    cfg,
                    state_dir,
                    len(names),
                    duration,
                    rate,
                    grace,
                    live,
                    seed,
                    outcome,
                    short=short,
                    hosts=plan,
                )

            return run_demo(args, make_node=make_node, body=body, observe=observe)
        finally:
            pg.close()
