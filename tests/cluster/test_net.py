"""Node links over tcp on 127.0.0.1 with CurveZMQ: real keys, sockets and processes."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest
import zmq

from actors._core.net.keys import load, write_new
from actors._core.net.net import ConnectError, NetError, NetLink, is_loopback, parse_tcp
from tests.cluster.netkit import PeerProcess, Recorder, make_link
from tests.polling import poll_until

pytestmark = pytest.mark.integration


@pytest.fixture
def key_path(tmp_path):
    path = tmp_path / "cluster.key"
    write_new(path)
    return str(path)


@pytest.fixture
def no_threads_left():
    before = {t.ident for t in threading.enumerate()}
    yield
    left = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    for t in left:
        t.join(timeout=5)
    assert not [t.name for t in left if t.is_alive()], "threads left behind"


def test_addresses_and_loopback():
    assert parse_tcp("tcp://127.0.0.1:7100") == ("127.0.0.1", 7100)
    assert parse_tcp("tcp://[::1]:0") == ("[::1]", 0)
    for bad in ("ipc:///tmp/x", "tcp://host", "tcp://:80", "tcp://h:99999", 7):
        with pytest.raises(NetError):
            parse_tcp(bad)
    assert is_loopback("127.0.0.1") and is_loopback("127.1.2.3") and is_loopback("[::1]") and is_loopback("localhost")
    assert not any(map(is_loopback, ("0.0.0.0", "*", "10.0.0.1", "::", "example.org")))


def test_non_loopback_listen_without_key_refuses_to_start():
    for listen in ("tcp://0.0.0.0:0", "tcp://*:7100", "tcp://10.1.2.3:0"):
        with pytest.raises(NetError, match="without a cluster key.*keygen"):
            NetLink("a", listen, None, on_frame=lambda p, f: None)


def test_a_keyless_link_refuses_to_connect_beyond_loopback(no_threads_left):
    rec = Recorder()
    with make_link("a", None, rec) as a:
        with pytest.raises(NetError, match="without a cluster key"):
            a.connect("tcp://10.1.2.3:7100")


def test_two_processes_exchange_frames_in_order(key_path, no_threads_left):
    key = load(key_path)
    rec = Recorder()
    with make_link("a", key, rec) as a:
        b = PeerProcess("b", key_path, connect=a.address)
        try:
            assert b.expect("CONNECTED") == "CONNECTED a"
            up = rec.expect("up")  # a connected back to b
            assert up[1] == "b" and up[2] == b.incarnation
            assert a.peers() == {"b": b.incarnation}
            payloads = [f"m{i}".encode() for i in range(500)]
            for p in payloads:
                a.send("b", [p, b"second frame"])
            got = [rec.expect("frame")[2] for _ in payloads]
            assert got == [[b"echo:" + p, b"echo:second frame"] for p in payloads]
            stats = a.stats()
            assert stats["frames_in"] == 500 and stats["frames_out"] == 500
            assert stats["zap_allowed"] >= 1 and stats.get("zap_denied", 0) == 0
            assert stats.get("garbage", 0) == 0
            # connecting again to the same node is idempotent
            assert a.connect(b.address) == "b"
        finally:
            b.close()
        down = rec.expect("down")
        assert down[1] == "b" and down[3] in ("peer_closed", "connection_closed")
        assert a.peers() == {}
        with pytest.raises(NetError, match="not connected"):
            a.send("b", [b"x"])


def test_a_peer_with_another_key_cannot_connect_or_deliver(tmp_path, key_path, no_threads_left):
    other = tmp_path / "other.key"
    write_new(other)
    rec = Recorder()
    with make_link("a", load(key_path), rec) as a:
        b = PeerProcess("b", str(other), connect=a.address)
        try:
            line = b.expect("CONNECT")
            assert line.startswith("CONNECT_FAILED") and "handshake failed" in line
        finally:
            b.close()
        assert a.wait_stats(lambda s: s.get("handshake_failures", 0) >= 1, 10)
        assert rec.frames == [] and a.peers() == {}


def _raw_dealer(ctx, address, public, secret, server_public):
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.curve_serverkey = server_public
    sock.curve_publickey = public
    sock.curve_secretkey = secret
    sock.connect(address)
    return sock


def _back_router(ctx, key):
    """The ROUTER a raw peer listens on for the link's connect-back, and its port."""
    rr = ctx.socket(zmq.ROUTER)
    rr.linger = 0
    rr.curve_server = True
    rr.curve_secretkey = key.secret
    rr.curve_publickey = key.public
    rr.bind("tcp://127.0.0.1:0")
    return rr, parse_tcp(rr.last_endpoint.decode())[1]


def _meet(ctx, link, key, name, inc=1):
    """A raw ZeroMQ peer that holds the key and does the first half of the
    handshake with ``link``: its HELLO is welcomed, and the link's connect-back
    HELLO has reached its ROUTER, not yet welcomed.  Returns the DEALER, the
    ROUTER and the connect-back's routing id."""
    rr, port = _back_router(ctx, key)
    dd = _raw_dealer(ctx, link.address, key.public, key.secret, key.public)
    dd.send_multipart([b"H", b'{"v":1,"name":"%s","inc":%d,"port":%d}' % (name.encode(), inc, port)])
    assert dd.poll(10_000) and dd.recv_multipart()[0] == b"W"
    assert rr.poll(10_000)
    rid, kind, _hello = rr.recv_multipart()
    assert kind == b"H"
    return dd, rr, rid


def _welcome(rr, rid, name, inc=1):
    rr.send_multipart([rid, b"W", b'{"v":1,"name":"%s","inc":%d}' % (name.encode(), inc)])


def _member(ctx, link, key, name, inc=1):
    """A raw peer through both halves of the handshake, so ``link`` counts it
    up and delivers its data.  Returns the DEALER and the ROUTER."""
    dd, rr, rid = _meet(ctx, link, key, name, inc)
    _welcome(rr, rid, name, inc)
    return dd, rr


def test_a_client_that_knows_only_the_public_key_is_denied_by_zap(key_path, no_threads_left):
    """The cluster public key is no secret: a CURVE client with its own keypair
    completes the crypto, and ZAP must still refuse it before any frame passes."""
    key = load(key_path)
    rec = Recorder()
    ctx = zmq.Context()
    try:
        with make_link("a", key, rec) as a:
            pub, sec = zmq.curve_keypair()
            sock = _raw_dealer(ctx, a.address, pub, sec, key.public)
            sock.send_multipart([b"H", b'{"v":1,"name":"evil","inc":1,"port":1}'])
            sock.send_multipart([b"D", b"payload"])
            assert a.wait_stats(lambda s: s.get("zap_denied", 0) >= 1, 10)
            sock.close()
            # a real member still gets through, and only its frames are delivered
            good, good_back = _member(ctx, a, key, "good")
            good.send_multipart([b"D", b"hello"])
            assert rec.expect("frame")[1:3] == ("good", [b"hello"])
            good.close()
            good_back.close()
            assert [p for p, _ in rec.frames] == ["good"]
            assert a.stats()["zap_allowed"] >= 1
    finally:
        ctx.destroy(linger=0)  # also closes what a failed assertion left open


def test_a_plaintext_zmq_peer_fails_the_handshake(key_path, no_threads_left):
    rec = Recorder()
    ctx = zmq.Context()
    try:
        with make_link("a", load(key_path), rec) as a:
            sock = ctx.socket(zmq.DEALER)
            sock.linger = 0
            sock.connect(a.address)
            sock.send_multipart([b"H", b'{"v":1,"name":"plain","inc":1,"port":1}'])
            sock.send_multipart([b"D", b"payload"])
            assert a.wait_stats(lambda s: s.get("handshake_failures", 0) >= 1, 10)
            sock.close()
            assert rec.frames == [] and a.stats().get("zap_allowed", 0) == 0
    finally:
        ctx.destroy(linger=0)  # also closes what a failed assertion left open


def test_raw_garbage_on_the_tcp_port_neither_crashes_nor_delivers(key_path, no_threads_left):
    key = load(key_path)
    rec = Recorder()
    with make_link("a", key, rec) as a:
        host, port = parse_tcp(a.address)
        blobs = [
            os.urandom(4096),
            b"GET / HTTP/1.0\r\n\r\n",
            b"\xff" + b"\x00" * 8 + b"\x7f\x03\x00CURVE" + b"\x00" * 15 + os.urandom(300),
        ]
        for blob in blobs:
            with socket.create_connection((host, port), timeout=10) as s:
                try:
                    s.sendall(blob)
                    s.shutdown(socket.SHUT_WR)
                    while s.recv(65536):  # until the listener hangs up, bounded by the socket timeout
                        pass
                except TimeoutError:
                    raise AssertionError("the listener kept a garbage connection open") from None
                except OSError:  # reset, broken pipe, or already hung up (ENOTCONN)
                    pass
        b = PeerProcess("b", key_path, connect=a.address)
        try:
            assert b.expect("CONNECTED") == "CONNECTED a"
            rec.expect("up")
            a.send("b", [b"still alive"])
            assert rec.expect("frame")[2] == [b"echo:still alive"]
        finally:
            b.close()
        assert [f for _, f in rec.frames] == [[b"echo:still alive"]]


def test_malformed_frames_from_a_member_are_dropped_and_counted(key_path, no_threads_left):
    key = load(key_path)
    rec = Recorder()
    ctx = zmq.Context()
    try:
        with make_link("a", key, rec) as a:
            sock = _raw_dealer(ctx, a.address, key.public, key.secret, key.public)
            sock.send_multipart([b"D", b"before hello"])  # no session yet
            assert sock.poll(10_000) and sock.recv_multipart()[0] == b"R"
            sock.send_multipart([b"H", b"{not json"])  # bad hello
            assert sock.poll(10_000) and sock.recv_multipart()[0] == b"R"
            sock.send_multipart([b"H", b'{"v":1,"name":"m","inc":"x","port":1}'])
            assert sock.poll(10_000) and sock.recv_multipart()[0] == b"R"
            sock.close()
            sock, back = _member(ctx, a, key, "m", inc=5)
            sock.send_multipart([b"?", b"unknown kind"])
            sock.send_multipart([b"T", b"tick with a body"])
            sock.send_multipart([b"D", b"ok"])
            assert rec.expect("frame")[1:3] == ("m", [b"ok"])
            stats = a.stats()
            assert stats["garbage"] == 4 and stats["unknown_session"] == 1
            assert [f for _, f in rec.frames] == [[b"ok"]]
            sock.close()
            back.close()
    finally:
        ctx.destroy(linger=0)  # also closes what a failed assertion left open


def test_sigkill_of_a_peer_is_noticed_by_the_socket_monitor_before_the_tick(key_path, no_threads_left):
    rec = Recorder()
    with make_link("a", load(key_path), rec, net_ticktime=15.0) as a:
        b = PeerProcess("b", key_path, connect=a.address)
        try:
            b.expect("CONNECTED")
            rec.expect("up")
            killed = time.monotonic()
            b.signal(signal.SIGKILL)
            down = rec.expect("down", timeout=7.5)
            # connection_closed comes only from the socket monitor; the tick would
            # say net_tick_timeout after 15 s.  How fast is for bench/, not a
            # timed test on a loaded machine (it took 1.08 s at load 19).
            assert down[1] == "b" and down[3] == "connection_closed"
            assert down[4] - killed < 7.5
        finally:
            b.close()


def test_a_stopped_peer_is_declared_down_after_net_ticktime(key_path, no_threads_left):
    ticktime = 2.0
    rec = Recorder()
    with make_link("a", load(key_path), rec, net_ticktime=ticktime) as a:
        b = PeerProcess("b", key_path, ticktime=ticktime, connect=a.address)
        try:
            b.expect("CONNECTED")
            rec.expect("up")
            stopped = time.monotonic()
            b.signal(signal.SIGSTOP)
            down = rec.expect("down", timeout=ticktime + 5)
            assert down[1] == "b" and down[3] == "net_tick_timeout"
            # b ticked every ticktime/4 until it stopped, so a declares it down
            # 3/4 to 1 ticktime later: never before it fell silent; the upper bound is
            # the expect above, wide enough for a loaded machine (speed is for bench/).
            elapsed = down[4] - stopped
            assert ticktime * 0.5 <= elapsed, elapsed
            assert a.peers() == {}
            b.signal(signal.SIGCONT)
            # b resumes, finds its connection rejected (or silent) and sees a down too
            assert b.expect("DOWN a", timeout=ticktime + 5).split()[3] in ("rejected", "net_tick_timeout")
            # and the two can connect again
            b.command(f"connect {a.address}")
            assert b.expect("CONNECTED") == "CONNECTED a"
            assert rec.expect("up")[1] == "b"
        finally:
            b.close()


def test_a_restarted_peer_is_a_new_incarnation(key_path, no_threads_left):
    rec = Recorder()
    with make_link("a", load(key_path), rec) as a:
        b1 = PeerProcess("b", key_path, connect=a.address)
        try:
            b1.expect("CONNECTED")
            first = rec.expect("up")[2]
            b1.signal(signal.SIGKILL)
            assert rec.expect("down")[2] == first
        finally:
            b1.close()
        b2 = PeerProcess("b", key_path, connect=a.address)
        try:
            b2.expect("CONNECTED")
            second = rec.expect("up")[2]
            assert second == b2.incarnation and second != first
            assert a.peers() == {"b": second}
        finally:
            b2.close()


def test_a_keyless_loopback_link_works_between_processes(no_threads_left):
    rec = Recorder()
    with make_link("a", None, rec) as a:
        b = PeerProcess("b", None)
        try:
            assert a.connect(b.address) == "b"
            a.send("b", [b"x"])
            assert rec.expect("frame")[2] == [b"echo:x"]
        finally:
            b.close()


def test_connect_to_nothing_times_out_and_a_closed_link_leaves_nothing(no_threads_left):
    rec = Recorder()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    with make_link("a", None, rec) as a:
        with pytest.raises(ConnectError, match="no handshake"):
            a.connect(f"tcp://127.0.0.1:{free}", timeout=0.3)
        assert a.stats()["connect_timeouts"] == 1
    a.close()  # idempotent
    with pytest.raises(NetError, match="closed"):
        a.connect("tcp://127.0.0.1:1")
    with pytest.raises(NetError, match="not started"):
        NetLink("n", "tcp://127.0.0.1:0", None, on_frame=rec.on_frame).connect("tcp://127.0.0.1:1")
    with pytest.raises(NetError, match="cannot listen"):
        with make_link(
            "x",
            None,
            rec,
        ) as x:
            NetLink("y", x.address, None, on_frame=rec.on_frame).start()


def test_simultaneous_connects_give_one_session_each_way(key_path, no_threads_left):
    key = load(key_path)
    ra, rc = Recorder(), Recorder()
    with make_link("a", key, ra) as a, make_link("c", key, rc) as c:
        results: dict[str, str] = {}
        go = threading.Barrier(2)

        def join(link, address):
            go.wait(5)
            results[link.name] = link.connect(address)

        threads = [
            threading.Thread(target=join, args=(a, c.address)),
            threading.Thread(target=join, args=(c, a.address)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert results == {"a": "c", "c": "a"}
        assert ra.expect("up")[1] == "c" and rc.expect("up")[1] == "a"
        for i in range(200):
            a.send("c", [b"%d" % i])
            c.send("a", [b"%d" % i])
        assert [rc.expect("frame")[2] for _ in range(200)] == [[b"%d" % i] for i in range(200)]
        assert [ra.expect("frame")[2] for _ in range(200)] == [[b"%d" % i] for i in range(200)]
        assert a.stats()["peers_up"] == 1 and c.stats()["peers_up"] == 1
    assert all(e[0] != "up" for e in list(ra.events.queue)) and all(e[0] != "up" for e in list(rc.events.queue))


def test_closing_a_link_tells_its_peers_and_disconnect_drops_one(key_path, no_threads_left):
    key = load(key_path)
    ra, rc, rd = Recorder(), Recorder(), Recorder()
    with make_link("c", key, rc) as c, make_link("d", key, rd) as d:
        a = make_link("a", key, ra)
        try:
            assert a.connect(c.address) == "c" and a.connect(d.address) == "d"
            # connect returns once a's side is up; c and d count a as up (and
            # so report its loss) only once their own link to a is welcomed
            rc.expect("up", timeout=5)
            rd.expect("up", timeout=5)
            a.disconnect("d")
            assert rd.expect("down", timeout=5)[1:4:2] == ("a", "peer_closed")
            assert ra.expect("down", timeout=5)[1:4:2] == ("d", "disconnected")
            assert a.peers() == {"c": c.incarnation}
        finally:
            a.close()
        assert rc.expect("down", timeout=5)[3] in ("peer_closed", "connection_closed")
        assert c.peers() == {} and d.peers() == {}


def test_frames_queued_before_the_welcome_keep_their_order_with_direct_sends(key_path, no_threads_left):
    """A node met through its HELLO can be sent to at once: frames wait behind our
    HELLO in the I/O thread until its WELCOME, and later direct sends from the
    caller's thread never overtake them."""
    key = load(key_path)
    rec = Recorder()
    ctx = zmq.Context()
    try:
        with make_link("a", key, rec) as a:
            rr, port = _back_router(ctx, key)
            dd = _raw_dealer(ctx, a.address, key.public, key.secret, key.public)
            dd.send_multipart([b"H", b'{"v":1,"name":"m","inc":7,"port":%d}' % port])
            assert dd.poll(10_000) and dd.recv_multipart()[0] == b"W"
            a.send("m", [b"q1"])  # a's DEALER to m is not welcomed yet
            assert rr.poll(10_000)
            rid, kind, _hello = rr.recv_multipart()
            assert kind == b"H"
            a.send("m", [b"q2"])
            assert a.peers() == {}
            rr.send_multipart([rid, b"W", b'{"v":1,"name":"m","inc":7}'])
            assert rec.expect("up")[1:3] == ("m", 7)
            for i in range(100):
                a.send("m", [b"d%d" % i])  # direct, from this thread
            got = []
            while len(got) < 102 and rr.poll(10_000):
                frames = rr.recv_multipart()
                if frames[1] == b"D":
                    got.append(frames[2])
            assert got == [b"q1", b"q2"] + [b"d%d" % i for i in range(100)]
            dd.close()
            rr.close()
    finally:
        ctx.destroy(linger=0)  # also closes what a failed assertion left open


def test_a_bye_that_overtakes_the_welcome_of_the_connect_back_still_takes_the_peer_down(key_path, no_threads_left):
    """The peer counts us up once its DEALER is welcomed and our HELLO came; our
    side waits for its WELCOME on our connect-back, another connection.  A BYE
    it sends right away can come first: it must not be lost, the peer goes up
    and at once down as ``peer_closed`` (regression: the BYE was dropped and the
    peer never seen down)."""
    key = load(key_path)
    rec = Recorder()
    ctx = zmq.Context()
    try:
        with make_link("a", key, rec) as a:
            dd, rr, rid = _meet(ctx, a, key, "m", inc=7)  # a's connect-back not welcomed yet
            dd.send_multipart([b"B"])
            assert a.wait_stats(lambda s: s.get("bye_before_up", 0) == 1, 10)
            assert a.peers() == {}
            _welcome(rr, rid, "m", inc=7)
            assert rec.expect("up")[1:3] == ("m", 7)
            assert rec.expect("down")[1:4] == ("m", 7, "peer_closed")
            assert a.peers() == {} and a.stats()["peers_down"] == 1
            dd.close()
            rr.close()
    finally:
        ctx.destroy(linger=0)


def test_data_that_overtakes_the_welcome_of_the_connect_back_waits_for_up(key_path, no_threads_left):
    """The peer may send data as soon as it counts us up, before our side is up
    (its WELCOME to our connect-back travels on another connection).  Those
    frames are held and delivered right after ``on_up``, in order, so the owner
    never gets a frame from a node it does not know (regression: a call made
    right after ``connect`` was answered into the void and hung)."""
    key = load(key_path)
    rec = Recorder()
    ctx = zmq.Context()
    try:
        with make_link("a", key, rec) as a:
            dd, rr, rid = _meet(ctx, a, key, "m", inc=7)  # a's connect-back not welcomed yet
            dd.send_multipart([b"D", b"x1"])
            dd.send_multipart([b"D", b"x2"])
            assert a.wait_stats(lambda s: s.get("held_before_up", 0) == 2, 10)
            assert rec.events.empty() and a.peers() == {}  # held: a does not know m yet
            _welcome(rr, rid, "m", inc=7)
            assert rec.events.get(timeout=10)[:3] == ("up", "m", 7)
            assert rec.events.get(timeout=10)[:3] == ("frame", "m", [b"x1"])
            assert rec.events.get(timeout=10)[:3] == ("frame", "m", [b"x2"])
            dd.close()
            rr.close()
    finally:
        ctx.destroy(linger=0)


def test_many_threads_send_at_once_and_each_keeps_its_order(key_path, no_threads_left):
    rec = Recorder()
    with make_link("a", load(key_path), rec) as a:
        b = PeerProcess("b", key_path, connect=a.address)
        try:
            b.expect("CONNECTED")
            rec.expect("up")

            def sender(t: int) -> None:
                for i in range(300):
                    a.send("b", [b"%d:%d" % (t, i)])

            threads = [threading.Thread(target=sender, args=(t,)) for t in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(20)
            got = [rec.expect("frame")[2][0] for _ in range(1200)]
            for t in range(4):
                mine = [g for g in got if g.startswith(b"echo:%d:" % t)]
                assert mine == [b"echo:%d:%d" % (t, i) for i in range(300)]
            assert a.stats()["frames_out"] == 1200
        finally:
            b.close()


def test_three_nodes_losing_one_leaves_the_others_connected(key_path, no_threads_left):
    rec = Recorder()
    with make_link("a", load(key_path), rec) as a:
        b = PeerProcess("b", key_path, connect=a.address)
        c = PeerProcess("c", key_path, connect=a.address)
        try:
            b.expect("CONNECTED")
            c.expect("CONNECTED")
            assert {rec.expect("up")[1], rec.expect("up")[1]} == {"b", "c"}
            c.signal(signal.SIGKILL)
            assert rec.expect("down")[1:4:2] == ("c", "connection_closed")
            assert a.peers() == {"b": b.incarnation}
            a.send("b", [b"after"])
            assert rec.expect("frame")[1:3] == ("b", [b"echo:after"])
            with pytest.raises(NetError):
                a.send("c", [b"x"])
        finally:
            b.close()
            c.close()


def test_a_greeting_rides_in_the_welcome_and_is_handed_over_before_the_peer_is_up(no_threads_left):
    """What each side offers (``greeting``) reaches the other's ``on_greeting`` before its
    ``on_up``: a table the layer above replicates is merged before the peer counts as connected."""
    events: dict[str, list[tuple[object, ...]]] = {"a": [], "b": []}

    def link(name: str) -> NetLink:
        log = events[name]
        return NetLink(
            name,
            "tcp://127.0.0.1:0",
            None,
            on_frame=lambda p, f: None,
            on_up=lambda p, i: log.append(("up", p)),
            greeting=lambda p: f"{name} greets {p}".encode(),
            on_greeting=lambda p, i, data: log.append(("greeting", p, data)),
        )

    a, b = link("a"), link("b")
    try:
        a.start()
        b.start()
        assert a.connect(b.address) == "b"
        poll_until(lambda: len(events["a"]) >= 2 and len(events["b"]) >= 2, "both sides up", 10.0)
        assert events["a"] == [("greeting", "b", b"b greets a"), ("up", "b")]
        assert events["b"] == [("greeting", "a", b"a greets b"), ("up", "a")]
    finally:
        a.close()
        b.close()
