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

from tests.replicator.cluster_kit import AUDIT_ENV, NODE_ENV, AuditedJob, NodesAudit


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


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
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            if words[0] == "connect":
                try:
                    say(f"CONNECTED {node.connect(words[1], timeout=10.0)}")
                except NetError as exc:
                    say(f"CONNECT_FAILED {exc}")
            elif words[0] == "start":
                start_replicator(node, AuditedJob, job_host="own")
                say("STARTED")
            elif words[0] == "status":
                say("STATUS " + json.dumps(cluster_status(node), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
