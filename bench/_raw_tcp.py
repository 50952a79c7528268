"""Raw pyzmq over tcp with CurveZMQ: the floor a cross-node actor row is compared with.

Run ``python bench/_raw_tcp.py`` (about 20 s) or ``--quick`` (a few seconds).

Between two Python processes on 127.0.0.1, with the same ~100-byte payload
as ``bench/messaging.py`` and CurveZMQ on (server and client keys of one
freshly generated cluster keypair, as nodes use it):

* ``call``: DEALER -> ROUTER -> DEALER round trip, p50/p99 per repetition;
* ``cast``: PUSH -> PULL one-way throughput, measured at the receiver
  (messages / time from the sender's first send to the end sentinel, both
  CLOCK_MONOTONIC stamps, shared by the processes of one machine);
* ``link``: the same round trip through `actors._net.NetLink` on both sides
  (handshake, heartbeats, ZAP, one I/O thread per side, callback delivery):
  the transport layer that node distribution will sit on, without actors.

Each measurement is repeated ``--reps`` times and the median of the
repetitions is reported.  Every loop is bounded by a count and a deadline.
The table goes to stdout, the figures to ``bench/results/raw_tcp.json``.
`measure` is importable, so ``bench/messaging.py`` can put these rows next
to its cross-node actor row in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import threading
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench._common import environment, median, summarize, write_json  # noqa: E402

PAYLOAD = ("benchmark payload " + "0123456789" * 9)[:100].encode()
END = b"__bench_end__"
_KEY_ENV = "OTPY_BENCH_CURVE"  # "public secret", Z85; passed by environment, never argv


# =============================================================================
# Children: one side of a measurement each
# =============================================================================


def _keys() -> tuple[bytes, bytes]:
    public, secret = os.environ[_KEY_ENV].encode().split()
    return public, secret


def _server(sock: Any, public: bytes, secret: bytes) -> None:
    sock.curve_server = True
    sock.curve_publickey = public
    sock.curve_secretkey = secret


def _client(sock: Any, public: bytes, secret: bytes) -> None:
    sock.curve_serverkey = public
    sock.curve_publickey = public
    sock.curve_secretkey = secret


def _say(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _child_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="_raw_tcp.py --child")
    ap.add_argument("--child", required=True, choices=["router", "dealer", "pull", "push", "link-echo", "link-call"])
    ap.add_argument("--endpoint", default="tcp://127.0.0.1:0")
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--max-s", type=float, required=True)
    args = ap.parse_args(argv)
    if args.child.startswith("link"):
        return _link_child(args)
    import zmq

    public, secret = _keys()
    ctx = zmq.Context()
    deadline = time.monotonic() + args.max_s
    out: dict[str, Any] = {}
    try:
        if args.child == "router":
            sock = ctx.socket(zmq.ROUTER)
            _server(sock, public, secret)
            sock.bind(args.endpoint)
            sock.rcvtimeo = int(args.max_s * 1000)
            _say({"ready": sock.last_endpoint.decode()})
            handled = 0
            for _ in range(args.n + args.warmup + 1):
                try:
                    frames = sock.recv_multipart()
                except zmq.Again:
                    break
                sock.send_multipart(frames)
                if frames[-1] == b"stop":
                    break
                handled += 1
            out = {"handled": handled}
        elif args.child == "dealer":
            sock = ctx.socket(zmq.DEALER)
            _client(sock, public, secret)
            sock.rcvtimeo = int(args.max_s * 1000)
            sock.connect(args.endpoint)
            for _ in range(args.warmup):
                sock.send(PAYLOAD)
                sock.recv()
            samples: list[float] = []
            clock = time.perf_counter_ns
            for i in range(args.n):
                t0 = clock()
                sock.send(PAYLOAD)
                sock.recv()
                samples.append((clock() - t0) / 1000.0)
                if not i & 255 and time.monotonic() > deadline:
                    break
            sock.send(b"stop")
            sock.recv()
            out = {"samples_us": samples}
        elif args.child == "pull":
            sock = ctx.socket(zmq.PULL)
            _server(sock, public, secret)
            sock.bind(args.endpoint)
            sock.rcvtimeo = int(args.max_s * 1000)
            _say({"ready": sock.last_endpoint.decode()})
            count, t_end = 0, None
            recv = sock.recv
            for _ in range(args.n + 1):
                try:
                    msg = recv()
                except zmq.Again:
                    break
                if msg == END:
                    t_end = time.monotonic()
                    break
                count += 1
            out = {"count": count, "t_end": t_end}
        else:  # push
            sock = ctx.socket(zmq.PUSH)
            _client(sock, public, secret)
            sock.connect(args.endpoint)
            # The handshake is not part of the throughput: wait until it is done.
            mon = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
            if not mon.poll(int(args.max_s * 1000)):
                raise RuntimeError("push: no CurveZMQ handshake")
            sock.disable_monitor()
            mon.close(linger=0)
            send = sock.send
            t_start = time.monotonic()
            sent = 0
            for i in range(args.n):
                send(PAYLOAD)
                sent += 1
                if not i & 4095 and time.monotonic() > deadline:
                    break
            sock.send(END)
            out = {"t_start": t_start, "sent": sent}
            sock.close(linger=int(args.max_s * 1000))
    finally:
        ctx.destroy(linger=0)
    _say(out)
    return 0


def _link_child(args: Any) -> int:
    from actors._cluster_key import ClusterKey
    from actors._net import NetLink

    key = ClusterKey(*_keys())
    if args.child == "link-echo":
        link: NetLink

        def echo(peer: str, frames: list[bytes]) -> None:
            link.send(peer, frames)

        link = NetLink("echo", args.endpoint, key, on_frame=echo)
        with link:
            _say({"ready": link.address})
            sys.stdin.read()  # until the parent closes stdin
        _say({"stats": link.stats()})
        return 0
    got = threading.Event()
    box: list[list[bytes]] = []

    def on_frame(peer: str, frames: list[bytes]) -> None:
        box.append(frames)
        got.set()

    samples: list[float] = []
    with NetLink("caller", "tcp://127.0.0.1:0", key, on_frame=on_frame) as link:
        peer = link.connect(args.endpoint, timeout=args.max_s)
        deadline = time.monotonic() + args.max_s
        clock = time.perf_counter_ns
        for i in range(args.warmup + args.n):
            t0 = clock()
            got.clear()
            link.send(peer, [PAYLOAD])
            if not got.wait(args.max_s):
                raise RuntimeError("link-call: no echo")
            if i >= args.warmup:
                samples.append((clock() - t0) / 1000.0)
            if not i & 255 and time.monotonic() > deadline:
                break
    _say({"samples_us": samples})
    return 0


# =============================================================================
# Parent: start children, collect their figures
# =============================================================================


class _Child:
    def __init__(self, role: str, n: int, max_s: float, env: dict[str, str], endpoint: str | None = None,
                 warmup: int = 0, stdin: bool = False) -> None:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", role, "--n", str(n),
               "--warmup", str(warmup), "--max-s", str(max_s)]
        if endpoint:
            cmd += ["--endpoint", endpoint]
        self.role, self.max_s = role, max_s
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.PIPE if stdin else None,
                                     text=True, env=env)

    def ready(self, timeout: float = 10.0) -> str:
        assert self.proc.stdout is not None
        readable, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if readable else ""
        try:
            return json.loads(line)["ready"]
        except (ValueError, KeyError):
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"{self.role} child did not start (got {line!r})") from None

    def result(self) -> dict[str, Any]:
        try:
            # A child reading stdin (link-echo) stops when communicate closes it.
            stdin = "" if self.proc.stdin is not None else None
            stdout, _ = self.proc.communicate(stdin, timeout=self.max_s + 10.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"{self.role} child did not finish in time") from None
        lines = [ln for ln in stdout.splitlines() if ln.strip()]
        if self.proc.returncode != 0 or not lines:
            raise RuntimeError(f"{self.role} child failed (rc={self.proc.returncode})")
        return json.loads(lines[-1])


def _env() -> dict[str, str]:
    import zmq

    public, secret = zmq.curve_keypair()
    env = dict(os.environ, **{_KEY_ENV: f"{public.decode()} {secret.decode()}"})
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def raw_call(n: int, warmup: int, max_s: float, env: dict[str, str]) -> list[float]:
    server = _Child("router", n, max_s, env, warmup=warmup)
    endpoint = server.ready()
    samples = _Child("dealer", n, max_s, env, endpoint=endpoint, warmup=warmup).result()["samples_us"]
    server.result()
    return samples


def raw_cast(n: int, max_s: float, env: dict[str, str]) -> float:
    pull = _Child("pull", n, max_s, env)
    endpoint = pull.ready()
    push = _Child("push", n, max_s, env, endpoint=endpoint).result()
    got = pull.result()
    if not got.get("t_end"):
        raise RuntimeError("raw cast: the end sentinel never arrived")
    return got["count"] / (got["t_end"] - push["t_start"])


def link_call(n: int, warmup: int, max_s: float, env: dict[str, str]) -> list[float]:
    echo = _Child("link-echo", n, max_s, env, stdin=True)
    endpoint = echo.ready()
    try:
        samples = _Child("link-call", n, max_s, env, endpoint=endpoint, warmup=warmup).result()["samples_us"]
    finally:
        echo.result()
    return samples


def measure(reps: int = 5, n_call: int = 5000, n_cast: int = 100_000, max_s: float = 20.0,
            with_link: bool = True) -> dict[str, Any]:
    """Medians over ``reps`` interleaved repetitions: call p50/p99 (us), cast rate (msg/s)."""
    env = _env()
    calls, casts, links = [], [], []
    for _ in range(reps):
        calls.append(summarize(raw_call(n_call, n_call // 10, max_s, env)))
        casts.append(raw_cast(n_cast, max_s, env))
        if with_link:
            links.append(summarize(link_call(n_call, n_call // 10, max_s, env)))
    result: dict[str, Any] = {
        "raw_tcp_curve_call": {"p50_us": median(c["p50_us"] for c in calls),
                               "p99_us": median(c["p99_us"] for c in calls), "reps": calls},
        "raw_tcp_curve_cast": {"msgs_per_s": round(median(casts)), "reps": [round(c) for c in casts]},
    }
    if with_link:
        result["netlink_call"] = {"p50_us": median(c["p50_us"] for c in links),
                                  "p99_us": median(c["p99_us"] for c in links), "reps": links}
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--child" in argv:
        return _child_main(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--no-link", action="store_true", help="leave out the NetLink row")
    args = ap.parse_args(argv)
    reps = args.reps or (3 if args.quick else 5)
    n_call, n_cast = (1000, 20_000) if args.quick else (5000, 100_000)
    figures = measure(reps, n_call, n_cast, with_link=not args.no_link)
    print(f"tcp 127.0.0.1, CurveZMQ on, {len(PAYLOAD)}-byte payload, median of {reps} repetitions")
    print(f"{'row':<22}{'p50 us':>10}{'p99 us':>10}{'msg/s':>12}")
    call = figures["raw_tcp_curve_call"]
    print(f"{'raw call (DEALER)':<22}{call['p50_us']:>10.1f}{call['p99_us']:>10.1f}{'':>12}")
    if "netlink_call" in figures:
        link = figures["netlink_call"]
        print(f"{'NetLink call':<22}{link['p50_us']:>10.1f}{link['p99_us']:>10.1f}{'':>12}")
    print(f"{'raw cast (PUSH)':<22}{'':>10}{'':>10}{figures['raw_tcp_curve_cast']['msgs_per_s']:>12,}")
    path = write_json("raw_tcp", {"environment": environment(), "reps": reps, "n_call": n_call,
                                  "n_cast": n_cast, "payload_bytes": len(PAYLOAD), **figures})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
