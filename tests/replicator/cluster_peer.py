"""A node of a clustered replicator in its own OS process, driven over stdin/stdout.

``cluster_peer.py --name c --db R --audit A --quiet Q --start S [--no-connect-all]`` prints
``ADDR <address>``, then serves commands until stdin closes: ``connect ADDR``
(``CONNECTED <name>``), ``start`` (the replicator tree, clustered, with
`AuditedJob`; ``STARTED``), ``status`` (``STATUS <json>``, the doc
processor's `cluster_status`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from actors import Node
from actors._net import NetError
from actors.replicator import cluster_status, start_replicator

from tests.cluster.peer_loop import connect_command, say, serve
from tests.replicator.cluster_kit import AUDIT_ENV, NODE_ENV, AuditedJob, NodesAudit


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--audit", required=True)
    parser.add_argument("--quiet", type=float, default=2.0)
    parser.add_argument("--start", type=float, default=0.5)
    parser.add_argument("--poll", type=float, default=0.2)
    parser.add_argument("--no-connect-all", dest="connect_all", action="store_false",
                        help="connect only where told to ([cluster] connect_all = false)")
    args = parser.parse_args()
    os.environ[AUDIT_ENV] = args.audit  # before the node forks its zygote: job hosts inherit them
    os.environ[NODE_ENV] = args.name
    config = {"replicator": {"cluster": "true", "replicator_db": args.db, "doc_poll_interval": str(args.poll),
                             "cluster_quiet_period": str(args.quiet), "cluster_start_period": str(args.start),
                             "interval": "500"}}
    with Node(config, name=args.name, listen="tcp://127.0.0.1:0", connect_all=args.connect_all) as node:
        node.spawn(NodesAudit)
        say(f"ADDR {node.address}")

        def start(words: list[str]) -> None:
            start_replicator(node, AuditedJob, job_host="own")
            say("STARTED")

        serve({
            "connect": connect_command(node.connect, 10.0, NetError),
            "start": start,
            "status": lambda words: say("STATUS " + json.dumps(cluster_status(node), default=str)),
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
