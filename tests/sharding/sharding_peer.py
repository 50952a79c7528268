"""A node in its own OS process running a sharded ``counter`` type, driven over stdin/stdout.

Prints ``ADDR <address>``, then serves: ``connect ADDR``, ``start STORE|- [remember]``
(starts the region, remembering entities if asked; prints ``STARTED``), ``active`` (prints ``ACTIVE k1,k2``:
the keys of the entities active here).
"""

from __future__ import annotations

import argparse
import sys

from actors import IncarnationEnded, NetError, Node, sharding
from tests.cluster.peer_loop import connect_command, say, serve
from tests.sharding.entities import Counter


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--key", default=None)
    args = parser.parse_args()
    with Node(name=args.name, listen="tcp://127.0.0.1:0", cluster_key=args.key, net_ticktime=4.0) as node:

        def start(words: list[str]) -> None:
            store = None if words[0] == "-" else words[0]
            remember = words[1:] == ["remember"]
            sharding.start(
                node, "counter", Counter, shards=20, store=store, lease_ttl=3.0, rebalance_every=0.5, remember=remember
            )
            say("STARTED")

        def active(words: list[str]) -> None:
            keys = sharding.status("counter")["active_keys"]
            say(f"ACTIVE {','.join(map(str, keys))}")

        say(f"ADDR {node.address}")
        serve(
            {
                "connect": connect_command(node.connect, 5.0, (NetError, IncarnationEnded)),
                "start": start,
                "active": active,
            }
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
