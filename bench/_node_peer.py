"""A node in its own OS process for the cluster benches, driven over stdin/stdout (`_netkit.NodeProcess`).

Prints ``ADDR <address>`` once listening, then serves until stdin closes (so
it never outlives the bench that started it).  One command, one a line:
``wait_for NAME`` prints ``WAITED True`` once NAME is connected (``False``
after 10 s).  Started from bench/, so its hosts import bench's modules
(`_group_actors`) by name.
"""

from __future__ import annotations

import argparse
import sys

from actors import Node


def say(line: str) -> None:
    """One answer line, flushed at once: the bench is waiting on it."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--key", default=None)
    parser.add_argument("--ticktime", type=float, default=15.0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with Node(
        name=args.name, listen=f"tcp://127.0.0.1:{args.port}", cluster_key=args.key, net_ticktime=args.ticktime
    ) as node:
        say(f"ADDR {node.address}")
        for line in sys.stdin:  # until the bench closes it
            words = line.split()
            if words[:1] == ["wait_for"] and len(words) == 2:
                say(f"WAITED {node.wait_for_node(words[1], timeout=10.0)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
