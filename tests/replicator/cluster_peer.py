"""A node of a clustered replicator in its own OS process, driven over stdin/stdout.

``cluster_peer.py --name c --db R --audit A --quiet Q --start S [--no-connect-all]`` prints
``ADDR <address>``, then serves commands until stdin closes: ``connect ADDR``
(``CONNECTED <name>``), ``start`` (the replicator tree, clustered, with
`AuditedJob`; ``STARTED``), ``status`` (``STATUS <json>``, the doc
processor's `cluster_status`, or ``{"ended": why}`` once the node ended its incarnation).

On the PostgreSQL store: ``--db`` is the store URL, ``--store`` turns it into
``[replicator] store`` (so leases are on), ``--lease-ttl``, ``--ticktime``
and ``--backoff`` set those knobs, no ``--audit`` runs the plain
`ReplicationJob` (the audit is the store's runs), and ``--job-host thread``
runs the jobs as threads of the node's process (a SIGSTOP of it freezes them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from actors import IncarnationEnded, Node
from actors._core.net.net import NetError
from actors.replicator import ReplicationJob, cluster_status, start_replicator
from tests.cluster.peer_loop import connect_command, say, serve
from tests.replicator.cluster_kit import AUDIT_ENV, NODE_ENV, AuditedJob, NodesAudit


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--audit")
    parser.add_argument("--store", action="store_true", help="--db is a PostgreSQL store URL")
    parser.add_argument("--lease-ttl", type=float)
    parser.add_argument("--ticktime", type=float)
    parser.add_argument("--backoff", type=float)
    parser.add_argument("--job-host", default="own")
    parser.add_argument("--quiet", type=float, default=2.0)
    parser.add_argument("--start", type=float, default=0.5)
    parser.add_argument("--poll", type=float, default=0.2)
    parser.add_argument(
        "--no-connect-all",
        dest="connect_all",
        action="store_false",
        help="connect only where told to ([cluster] connect_all = false)",
    )
    args = parser.parse_args()
    if args.audit:
        os.environ[AUDIT_ENV] = args.audit  # before the node forks its zygote: job hosts inherit them
    os.environ[NODE_ENV] = args.name
    replicator = {
        "cluster": "true",
        "replicator_db": args.db,
        "doc_poll_interval": str(args.poll),
        "cluster_quiet_period": str(args.quiet),
        "cluster_start_period": str(args.start),
        "interval": "500",
    }
    if args.store:
        replicator["store"] = args.db
    for key, value in (("lease_ttl", args.lease_ttl), ("backoff_interval", args.backoff)):
        if value is not None:
            replicator[key] = str(value)
    job_class = AuditedJob if args.audit else ReplicationJob
    job_host = None if args.job_host == "thread" else args.job_host
    with Node(
        {"replicator": replicator},
        name=args.name,
        listen="tcp://127.0.0.1:0",
        connect_all=args.connect_all,
        net_ticktime=args.ticktime,
    ) as node:
        if args.audit:
            node.spawn(NodesAudit)
        say(f"ADDR {node.address}")

        def status() -> dict[str, Any]:
            """The replicator's cluster status, or ``{"ended": why}`` once the node's incarnation ended."""
            if node.ended is not None:  # its actors are stopped, or stopping
                return {"ended": node.ended}
            return dict(cluster_status(node))

        def start(words: list[str]) -> None:
            start_replicator(node, job_class, job_host=job_host)
            say("STARTED")

        serve(
            {
                "connect": connect_command(node.connect, 10.0, (NetError, IncarnationEnded)),
                "start": start,
                "status": lambda words: say("STATUS " + json.dumps(status(), default=str)),
            }
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
