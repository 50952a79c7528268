"""Seeds: dialed at start, retried with a bounded back-off until they come
up, dialed again when lost.  The policy without processes, then a node in
this process whose seed is a node process that starts late and restarts."""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

from actors import ConnectError, Node
from actors._core.net.seeds import MAX_DELAY, SeedDialer, backoff
from tests.cluster.netkit import NodeProcess


def test_backoff_doubles_from_the_first_delay_and_is_bounded() -> None:
    assert backoff(0) == 0.0
    delays = [backoff(n, initial=0.2, cap=5.0) for n in range(1, 10)]
    assert delays[:5] == [0.2, 0.4, 0.8, 1.6, 3.2]
    assert delays[5:] == [5.0] * 4
    assert backoff(10_000) == MAX_DELAY


class FakeCluster:
    """``connect`` fails ``fail_first`` times, then returns the seed's name;
    ``connected[n]`` is set at the n-th successful connect."""

    def __init__(self, fail_first: int) -> None:
        self.fail_first = fail_first
        self.attempts = 0
        self.up: set[str] = set()
        self.lock = threading.Lock()
        self.connected = [threading.Event() for _ in range(3)]
        self.connects = 0

    def connect(self, address: str, timeout: float) -> str:
        with self.lock:
            self.attempts += 1
            if self.attempts <= self.fail_first:
                raise ConnectError(f"connect to {address}: no handshake within the timeout")
            self.up.add("s")
            self.connected[self.connects].set()
            self.connects += 1
            return "s"

    def is_up(self, name: str) -> bool:
        with self.lock:
            return name in self.up


def test_a_seed_is_retried_until_it_answers_then_redialed_when_lost() -> None:
    cluster = FakeCluster(fail_first=4)
    dialer = SeedDialer(
        ["tcp://127.0.0.1:1", "tcp://127.0.0.1:1"],
        cluster.connect,
        cluster.is_up,
        attempt_timeout=0.1,
        initial=0.001,
        cap=0.01,
    )
    assert dialer.seeds == ["tcp://127.0.0.1:1"]  # one dialer per address
    dialer.start()
    try:
        assert dialer.wait_first_round(5.0)
        assert cluster.connected[0].wait(5.0)
        assert cluster.attempts == 5  # four failures, then connected: no further attempt while up
        with cluster.lock:
            cluster.up.discard("s")  # the node is lost
        dialer.node_changed()
        assert cluster.connected[1].wait(5.0)
        assert cluster.attempts == 6
    finally:
        dialer.close()


def test_a_seed_that_is_this_node_is_dropped(caplog: Any) -> None:
    calls: list[str] = []

    def connect(address: str, timeout: float) -> str:
        calls.append(address)
        raise ConnectError(f"connect to {address}: rejected (a is this node's own name)")

    dialer = SeedDialer(["tcp://127.0.0.1:2"], connect, lambda name: False, initial=0.001, cap=0.01)
    with caplog.at_level(logging.INFO, logger="actors.node"):
        dialer.start()
        assert dialer.wait_first_round(5.0)
        dialer.close()
    assert calls == ["tcp://127.0.0.1:2"]
    assert "is this node" in caplog.text


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_seed_that_starts_late_is_connected_and_redialed_after_a_restart(key: str) -> None:
    port = _free_port()
    seed = f"tcp://127.0.0.1:{port}"
    b = None
    with Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key, seeds=[seed]) as node_a:
        try:
            assert node_a.nodes() == []  # nothing listens there yet: the node started anyway
            b = NodeProcess("b", key, port=port)
            assert node_a.wait_for_node("b", timeout=20.0)
            # connecting to a node the seeds already connected is a no-op
            assert node_a.connect(seed) == "b" and node_a.nodes() == ["b"]
            down = node_a.monitor_node("b")
            b.kill()
            assert down.wait(5.0) == ("nodedown", "b")
            b.close()
            b = NodeProcess("b", key, port=port)  # a new incarnation at the seed address
            assert node_a.wait_for_node("b", timeout=20.0)
            assert b.ask("wait_for a", "WAITED") == "True"
        finally:
            if b is not None:
                b.close()


def test_seeds_from_the_cluster_section(key: str) -> None:
    b = NodeProcess("b", key)
    try:
        config = {"cluster": {"name": "cfg", "listen": "tcp://127.0.0.1:0", "cluster_key": key, "seeds": b.address}}
        with Node(config) as node:
            assert node.wait_for_node("b", timeout=10.0)
            assert b.ask("wait_for cfg", "WAITED") == "True"
    finally:
        b.close()


def test_a_node_listing_itself_as_a_seed_drops_that_seed() -> None:
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    with Node(name="self", listen=address, seeds=[address]) as node:
        assert node._dist.seeds is not None
        assert node._dist.seeds.wait_first_round(5.0)
        node._dist.seeds.close()  # returns at once: the dialer for its own address has ended
        assert all(not t.is_alive() for t in node._dist.seeds._threads)
        assert node.nodes() == []


def test_keywords_override_their_own_cluster_keys_of_an_ini_node(key: str) -> None:
    """The section names the node; ``seeds=`` and ``cluster_key=`` given as
    keywords still count (each keyword overrides its own key, not only when
    ``name``/``listen`` are keywords too)."""
    b = NodeProcess("b", key)
    try:
        config = {"cluster": {"name": "kw", "listen": "tcp://127.0.0.1:0"}}
        with Node(config, cluster_key=key, seeds=b.address, net_ticktime=3.0) as node:  # one address: a str
            assert node.name == "kw"
            assert node.wait_for_node("b", timeout=10.0)  # the seed was dialed, with the key
            assert b.ask("wait_for kw", "WAITED") == "True"
    finally:
        b.close()
