"""The peer side of `netkit.LineProcess`: answers on stdout, commands from stdin.

The peer scripts (``net_peer.py``, ``node_peer.py``, the replicator's
``cluster_peer.py``) differ only in what their commands do; reading the
commands, answering in whole flushed lines and the ``connect`` command are the
same in each, so they live here once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping

#: A command's handler: gets the words after the command's name.
Handler = Callable[[list[str]], None]


def say(line: str) -> None:
    """One answer line, flushed at once: the test is waiting on it."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def serve(handlers: Mapping[str, Handler]) -> None:
    """Run the commands read from stdin, one a line, until it closes (so the
    peer never outlives the test that started it).  The first word names the
    command; blank lines and unknown commands are passed over."""
    for line in sys.stdin:
        words = line.split()
        if words and words[0] in handlers:
            handlers[words[0]](words[1:])


def connect_command(
    connect: Callable[..., str], timeout: float, errors: type[BaseException] | tuple[type[BaseException], ...]
) -> Handler:
    """``connect ADDR``: says ``CONNECTED <name>``, or ``CONNECT_FAILED <error>``
    when ``connect(ADDR, timeout=...)`` raises one of ``errors``."""

    def run(args: list[str]) -> None:
        try:
            say(f"CONNECTED {connect(args[0], timeout=timeout)}")
        except errors as exc:
            say(f"CONNECT_FAILED {exc}")

    return run
