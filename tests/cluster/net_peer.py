"""A node link in its own OS process, driven by the tests over stdin/stdout.

Prints ``ADDR <address>`` once listening, then ``UP <name> <inc>``,
``DOWN <name> <inc> <reason>`` and ``CONNECTED <name>`` / ``CONNECT_FAILED
<error>`` as things happen.  Every data frame it receives is echoed back to
its sender with ``echo:`` prepended.  It exits when stdin closes, so it
never outlives the test that started it.
"""

from __future__ import annotations

import argparse
import sys

from actors._core.net.keys import load
from actors._core.net.net import ConnectError, NetError, NetLink
from tests.cluster.peer_loop import connect_command, say, serve


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--key", default=None)
    parser.add_argument("--ticktime", type=float, default=15.0)
    parser.add_argument("--connect", default=None)
    args = parser.parse_args()
    key = load(args.key) if args.key else None
    link: NetLink

    def on_frame(peer: str, frames: list[bytes]) -> None:
        try:
            link.send(peer, [b"echo:" + f for f in frames])
        except NetError:
            pass

    link = NetLink(
        args.name,
        "tcp://127.0.0.1:0",
        key,
        on_frame=on_frame,
        net_ticktime=args.ticktime,
        on_up=lambda n, i: say(f"UP {n} {i}"),
        on_down=lambda n, i, r: say(f"DOWN {n} {i} {r}"),
    )
    with link:
        say(f"ADDR {link.address} {link.incarnation}")
        connect = connect_command(link.connect, 5.0, ConnectError)
        if args.connect:
            connect([args.connect])
        serve({"connect": connect, "stats": lambda words: say(f"STATS {sorted(link.stats().items())}")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
