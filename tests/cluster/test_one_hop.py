"""One hop between nodes (`actors._core.net.direct`, `actors._core.transport.tcp`):
a process of one node sends straight to the process of another node an
actor lives in, and the answer comes straight to the calling thread, with
neither node process on the way; only the cluster key gets a frame in, and
an incarnation declared down is not heard."""

from __future__ import annotations

import random
import socket
from typing import Any

import pytest
import zmq

from actors import Node
from actors._core.net.keys import load
from actors._core.runtime.kinds import K_CAST
from actors._core.transport.tcp import NoFreePort, TcpSettings, bind_tcp
from actors._core.wire.codec import FrameError, encode_frame, unwrap_remote, wrap_remote
from tests.cluster.dist_actors import Worker
from tests.cluster.netkit import NodeProcess
from tests.cluster.test_direct import Forwarder
from tests.polling import poll_until

pytestmark = pytest.mark.integration


def _link_traffic(node: Node) -> int:
    """Frames node ``node``'s link carried either way (ticks not counted)."""
    assert node._dist.net is not None
    stats = node._dist.net.stats()
    return sum(stats.get(k, 0) for k in ("frames_out", "frames_in", "host_frames_in"))


def _seen_within(ref: Any, want: Any, timeout: float = 10.0) -> list[Any]:
    """What ``ref`` has seen, once it has seen ``want`` (each try a real call)."""

    def seen_it() -> list[Any] | None:
        got: list[Any] = ref.call("seen")
        return got if want in got else None

    seen: list[Any] = poll_until(seen_it, f"{want!r} seen by {ref!r}", timeout)
    return seen


def _member_push(ctx: "zmq.Context[zmq.Socket[bytes]]", key: str, port: int) -> "zmq.Socket[bytes]":
    """A PUSH holding the cluster key, connected to a process's tcp ``port`` on loopback."""
    cluster = load(key)
    sock = ctx.socket(zmq.PUSH)
    sock.linger = 2000
    sock.curve_serverkey = cluster.public
    sock.curve_publickey = cluster.public
    sock.curve_secretkey = cluster.secret
    sock.connect(f"tcp://127.0.0.1:{port}")
    return sock


# -- the envelope and the settings, without processes ---------------------------------


def test_the_envelope_names_the_origin_and_refuses_garbage() -> None:
    frame = encode_frame(K_CAST, "h1.1", None, None, "h2", "x")
    assert unwrap_remote(wrap_remote(b"node-a@1f", frame)) == ("node-a@1f", frame)
    for bad in (b"", b"J[]", b"S", b"S\x00\x05ab", b"S\x00\x02ab" + frame):
        with pytest.raises(FrameError):
            unwrap_remote(bad)


def test_processes_listen_where_their_node_listens() -> None:
    assert TcpSettings.from_listen("tcp://10.1.2.3:7100", None, None).host == "10.1.2.3"
    assert TcpSettings.from_listen("tcp://0.0.0.0:0", None, None).host == "0.0.0.0"
    assert TcpSettings.from_listen("tcp://[::1]:7100", None, None).host == "[::1]"


def test_a_port_range_is_tried_whole_and_a_full_one_says_so() -> None:
    ctx = zmq.Context()
    try:
        first = ctx.socket(zmq.PULL)
        taken = first.bind_to_random_port("tcp://127.0.0.1")
        other = ctx.socket(zmq.PULL)
        with pytest.raises(NoFreePort, match=f"direct_ports = {taken}-{taken} is taken"):
            bind_tcp(other, TcpSettings("127.0.0.1", ports=(taken, taken)))
    finally:
        ctx.destroy(linger=0)


# -- through Node ------------------------------------------------------------------------


def test_calls_between_hosts_of_two_nodes_pass_no_node_process(node_a: Node, peer_b: NodeProcess) -> None:
    node_a.connect(peer_b.address)
    there = node_a.spawn(Worker, "b", node="b", host="own")
    here = node_a.spawn(Forwarder, host="own")
    from_b = node_a.spawn(Forwarder, node="b", host="own")
    local = node_a.spawn(Worker, "a", host="own")
    assert there.port and here.port and from_b.port  # each listens itself
    assert here.call(("call", there, "ping"))[0] == "pong"  # connections made
    assert from_b.call(("call", local, "ping"))[0] == "pong"
    assert there.call("ping")[0] == "pong"
    before = _link_traffic(node_a)
    for i in range(50):
        assert here.call(("call", there, ("echo", i))) == i  # a's host -> b's host and back
        assert from_b.call(("call", local, ("echo", i))) == i  # b's host -> a's host and back
        assert there.call(("echo", i)) == i  # a's main thread -> b's host and back
    assert here.call(("casts", there, 300)) == [("cast", i) for i in range(300)]  # order per pair
    # Nothing of it crossed node a's link: b's node process saw none of it either,
    # as every frame went straight between the two processes.
    assert _link_traffic(node_a) == before


def test_the_programs_actors_are_one_hop_away_too(node_a: Node, peer_b: NodeProcess) -> None:
    """The node process listens on tcp like a host: a host of another node
    calls an actor of the program itself, and casts to it in order, with
    nothing crossing the link."""
    node_a.connect(peer_b.address)
    mine = node_a.spawn(Worker, "a")  # in the program's own process
    from_b = node_a.spawn(Forwarder, node="b", host="own")
    assert mine.port  # the node process's endpoint listens itself
    assert from_b.call(("call", mine, "ping"))[0] == "pong"  # connection made
    before = _link_traffic(node_a)
    for i in range(50):
        assert from_b.call(("call", mine, ("echo", i))) == i
    assert from_b.call(("casts", mine, 300)) == [("cast", i) for i in range(300)]
    assert _link_traffic(node_a) == before


def test_only_the_cluster_key_gets_a_frame_into_a_process(node_a: Node, peer_b: NodeProcess, key: str) -> None:
    node_a.connect(peer_b.address)
    there = node_a.spawn(Worker, "b", node="b", host="own")
    assert there.call("ping")[0] == "pong"
    cluster = load(key)
    address = f"tcp://127.0.0.1:{there.port}"
    ctx = zmq.Context()
    try:

        def push(public: bytes | None, secret: bytes | None, body: str) -> None:
            sock = ctx.socket(zmq.PUSH)
            sock.linger = 2000
            if public is not None and secret is not None:
                sock.curve_serverkey = cluster.public
                sock.curve_publickey = public
                sock.curve_secretkey = secret
            sock.connect(address)
            frame = encode_frame(K_CAST, there.id, None, None, "h99", body)
            sock.send(wrap_remote(node_a.id.encode(), frame))
            sock.close()

        push(None, None, "plain")  # no CURVE at all
        other_public, other_secret = zmq.curve_keypair()
        push(other_public, other_secret, "other key")  # a keypair that is not the cluster's
        push(cluster.public, cluster.secret, "member")  # the control: the cluster key gets in
        seen = _seen_within(there, ("cast", "member"))
        assert ("cast", "member") in seen
        assert ("cast", "plain") not in seen and ("cast", "other key") not in seen
    finally:
        ctx.destroy(linger=0)


def test_an_incarnation_declared_down_is_not_heard(key: str, peer_b: NodeProcess) -> None:
    first = Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key)
    try:
        first.connect(peer_b.address)
        there = first.spawn(Worker, "b", node="b", host="own")
        assert there.call("ping")[0] == "pong"
        gone_id = first.id
    finally:
        first.close()  # b declares that incarnation of a down
    second = Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key)
    try:
        second.connect(peer_b.address)
        peer_b.command("wait_for a")
        peer_b.expect("WAITED")
        there_again = second.spawn(Worker, "b2", node="b", host="own")
        assert there_again.call("ping")[0] == "pong"
        ctx = zmq.Context()
        try:
            for origin, body in ((gone_id, "from the old incarnation"), (second.id, "from the new one")):
                sock = _member_push(ctx, key, there_again.port)
                sock.send(wrap_remote(origin.encode(), encode_frame(K_CAST, there_again.id, None, None, "h9", body)))
                sock.close()
            seen = _seen_within(there_again, ("cast", "from the new one"))
            assert ("cast", "from the new one") in seen
            assert ("cast", "from the old incarnation") not in seen
        finally:
            ctx.destroy(linger=0)
    finally:
        second.close()


def test_a_frame_from_a_node_not_yet_up_waits_until_it_is(node_a: Node, peer_b: NodeProcess, key: str) -> None:
    """A node's side of a link may be up a few milliseconds before the
    other's, and its processes send straight at once: the receiving process
    holds what it gets from a node it has not been told is up, and handles it
    once told, before anything later from that node (acting on it earlier
    would answer through a node process that does not know the sender yet)."""
    node_a.connect(peer_b.address)
    there = node_a.spawn(Worker, "b", node="b", host="own")
    here = node_a.spawn(Forwarder, host="own")  # asks for us: node c below is this process's newest node

    def seen_once(want: Any) -> list[Any]:
        def seen() -> list[Any] | None:
            got: list[Any] = here.call(("call", there, "seen"))
            return got if want in got else None

        found: list[Any] = poll_until(seen, f"{want!r} seen by b's worker", 10.0)
        return found

    assert here.call(("call", there, "ping"))[0] == "pong"
    with Node(name="c", listen="tcp://127.0.0.1:0", cluster_key=key) as early:
        ctx = zmq.Context()
        try:
            sock = _member_push(ctx, key, there.port)
            # One connection, so b's host reads them in this order.
            for origin, body in ((early.id, "before c is up"), (node_a.id, "marker")):
                sock.send(wrap_remote(origin.encode(), encode_frame(K_CAST, there.id, None, None, "h9", body)))
            assert ("cast", "before c is up") not in seen_once(("cast", "marker"))  # held, not dropped:
            early.connect(peer_b.address)
            seen = seen_once(("cast", "before c is up"))  # handled once b told its host c is up
            assert seen.index(("cast", "marker")) < seen.index(("cast", "before c is up"))
            assert seen.count(("cast", "before c is up")) == 1
            sock.close()
        finally:
            ctx.destroy(linger=0)


def test_direct_ports_keep_every_process_in_the_range_and_a_full_range_falls_back(
    key: str, peer_b: NodeProcess
) -> None:
    """``[cluster] direct_ports``: hosts and reply channels listen in the range;
    where the range is full a process does not listen, and frames to it come
    through its node's port instead."""
    base = random.randrange(20_000, 30_000)  # below Linux's ephemeral ports: outgoing connections stay out
    config = {"cluster": {"direct_ports": f"{base}-{base + 199}"}}
    with Node(config=config, name="a", listen="tcp://127.0.0.1:0", cluster_key=key) as ranged:
        ranged.connect(peer_b.address)
        here = ranged.spawn(Forwarder, host="own")
        there = ranged.spawn(Worker, "b", node="b", host="own")
        assert base <= here.port <= base + 199
        assert here.call(("call", there, ("echo", 1))) == 1
        assert there.call(("echo", 2)) == 2  # the main thread's reply channel listens in the range too
        channel = ranged._rt.reply_channel()
        assert channel.remote_name is not None and base <= int(channel.remote_name.rpartition(":")[2]) <= base + 199
    taken = socket.socket()
    try:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        full = {"cluster": {"direct_ports": f"{port}-{port}"}}
        with Node(config=full, name="a", listen="tcp://127.0.0.1:0", cluster_key=key) as crowded:
            crowded.connect(peer_b.address)
            here = crowded.spawn(Worker, "a", host="own")
            assert here.port == 0  # no free port in its range: it does not listen
            from_b = crowded.spawn(Forwarder, node="b", host="own")
            assert from_b.call(("call", here, ("echo", 3))) == 3  # through a's node port
            assert from_b.call(("call", here, "ping"))[0] == "pong"
    finally:
        taken.close()


def test_direct_false_keeps_every_frame_on_the_nodes_port(key: str, peer_b: NodeProcess) -> None:
    with Node(config={"cluster": {"direct": "false"}}, name="a", listen="tcp://127.0.0.1:0", cluster_key=key) as quiet:
        quiet.connect(peer_b.address)
        here = quiet.spawn(Forwarder, host="own")
        there = quiet.spawn(Worker, "b", node="b", host="own")
        assert here.port == 0  # a's host does not listen
        assert here.call(("call", there, ("echo", 7))) == 7  # b's answers reach it through a's node
