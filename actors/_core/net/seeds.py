"""Seeds: the nodes a node dials at start, and again whenever one is lost.

Erlang's kernel has the same idea (``sync_nodes_optional`` with
``sync_nodes_timeout``): a list of nodes to connect to at boot, waited for
a bounded time, with the boot going on without the ones that are not up.
Here each seed address gets a dialer thread that connects, and when the
connection is lost (or never came) tries again after a back-off that
doubles from `INITIAL_DELAY` up to `MAX_DELAY`, until the node closes.
So a cluster whose nodes list each other as seeds heals by itself: a node
that restarts is dialed again by the others, whatever order they start in.

A seed that answers with this node's own name (the same seed list on every
node) is dropped; one that holds another cluster key is retried like one
that is down, with a warning, since an operator may fix the key file.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from actors._core.net.protocol import NetError

__all__ = ["ATTEMPT_TIMEOUT", "INITIAL_DELAY", "MAX_DELAY", "SeedDialer", "backoff"]

log = logging.getLogger("actors.node")

INITIAL_DELAY = 0.2
MAX_DELAY = 5.0
#: How long one attempt waits for the handshake.  While it waits, ZeroMQ
#: itself re-dials a refused tcp connection every 100 ms, so a seed that
#: comes up during an attempt is caught by that attempt.
ATTEMPT_TIMEOUT = 2.0


def backoff(failures: int, initial: float = INITIAL_DELAY, cap: float = MAX_DELAY) -> float:
    """Seconds to wait after ``failures`` failed attempts in a row (>= 1)."""
    if failures < 1:
        return 0.0
    return min(cap, initial * 2.0 ** min(failures - 1, 30))


class SeedDialer:
    """Keeps a node connected to its seed addresses (one thread per seed).

    ``connect(address, timeout)`` returns the node's name or raises
    `NetError`; ``is_up(name)`` says whether that node is connected now.
    """

    def __init__(
        self,
        seeds: Iterable[str],
        connect: Callable[[str, float], str],
        is_up: Callable[[str], bool],
        *,
        attempt_timeout: float = ATTEMPT_TIMEOUT,
        initial: float = INITIAL_DELAY,
        cap: float = MAX_DELAY,
    ) -> None:
        self.seeds = list(dict.fromkeys(seeds))
        self._connect = connect
        self._is_up = is_up
        self._attempt_timeout = attempt_timeout
        self._initial = initial
        self._cap = cap
        self._cond = threading.Condition()
        self._stopped = False
        self._tried: set[str] = set()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for address in self.seeds:
            thread = threading.Thread(target=self._dial, args=(address,), name=f"otpy-seed-{address}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def wait_first_round(self, timeout: float) -> bool:
        """Block until every seed was tried once (connected or failed); False after ``timeout``."""
        with self._cond:
            return self._cond.wait_for(lambda: self._stopped or len(self._tried) >= len(self.seeds), timeout)

    def node_changed(self) -> None:
        """A node went down: dialers whose seed it was look again now."""
        with self._cond:
            self._cond.notify_all()

    def stop(self) -> None:
        """Stop dialing, without waiting for the dialers (an attempt under way still ends)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def close(self, timeout: float = 10.0) -> None:
        """Stop dialing; an attempt under way ends when the link closes (or times out)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    def _dial(self, address: str) -> None:
        failures = 0
        while True:
            with self._cond:
                if self._stopped:
                    return
            try:
                name = self._connect(address, self._attempt_timeout)
            except NetError as exc:
                with self._cond:
                    self._tried.add(address)
                    self._cond.notify_all()
                    if self._stopped:
                        return
                if "this node's own name" in str(exc):
                    log.info("seed %s is this node: not dialed", address)
                    return
                failures += 1
                delay = backoff(failures, self._initial, self._cap)
                log.log(
                    logging.WARNING if failures == 1 else logging.DEBUG,
                    "seed %s: %s; trying again, at most every %s s",
                    address,
                    exc,
                    self._cap,
                )
                with self._cond:
                    self._cond.wait_for(lambda: self._stopped, delay)
                continue
            if failures:
                log.info("seed %s (node %s) connected after %d failed attempts", address, name, failures)
            failures = 0
            with self._cond:
                self._tried.add(address)
                self._cond.notify_all()
                # Connected: wait until that node is lost (woken by node_changed,
                # and looking again every cap seconds in case a wake-up raced).
                while not self._stopped and self._is_up(name):
                    self._cond.wait(self._cap)
                if self._stopped:
                    return
            log.info("seed %s (node %s) is down: dialing it again", address, name)
            with self._cond:  # a short pause: a node that just went may need a moment to come back
                self._cond.wait_for(lambda: self._stopped, self._initial)
