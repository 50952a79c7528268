"""Raw pyzmq baselines: the floor every messaging figure is divided by.

One set of loops for every transport the kernel uses, so that an actor row
and its baseline differ only in the actor machinery:

* ``call``: DEALER -> ROUTER -> DEALER round trip between two Python
  processes, a sample per round trip (microseconds);
* ``cast``: PUSH -> PULL one-way throughput, measured at the receiver
  (messages / time from the sender's first send to the end sentinel, both
  CLOCK_MONOTONIC stamps, shared by the processes of one machine).

Over ``ipc://`` (processes of one node, `bench/messaging.py`'s local rows)
or ``tcp://127.0.0.1:0`` with CurveZMQ on (server and client keys of one
freshly generated keypair, as cluster nodes use it: the cross-node rows).
Each side is a child process started from this file (``--child ROLE``),
pinned with ``os.sched_setaffinity`` when asked, importing only zmq so it
starts in ~50 ms.  The Curve keypair goes to the children through the
environment, never argv.

Run on its own, ``python bench/_raw.py`` (``--quick`` for a smoke run)
prints the tcp+Curve rows and, beside them, the round trip through
`actors._core.net.net.NetLink` on both sides (handshake, heartbeats, ZAP, one I/O
thread per side, callback delivery): the node-to-node link without actors.
Figures go to ``bench/results/raw.json``.
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
from collections.abc import Iterable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Exactly 100 characters (100 bytes in UTF-8), the payload of every messaging row.
PAYLOAD_STR = ("benchmark payload " + "0123456789" * 9)[:100]
PAYLOAD = PAYLOAD_STR.encode()
END = b"__bench_end__"
_KEY_ENV = "OTPY_BENCH_CURVE"  # "public secret", Z85
TCP_ANY = "tcp://127.0.0.1:0"
ROLES = ("router", "dealer", "pull", "push", "link-echo", "link-call")


# =============================================================================
# Children: one side of a measurement each
# =============================================================================


def thread_switches(pid: int) -> dict[int, tuple[str, int, int]]:
    """Each thread of ``pid``: (name, voluntary, involuntary context switches), from
    ``/proc/<pid>/task/*/status``.  A voluntary switch is a thread blocking
    (in ``recv``, a futex, a poll) and giving its CPU away: on one core each
    is a hand-off to another thread.  A thread that ended between two reads
    is missing from the later one."""
    out: dict[int, tuple[str, int, int]] = {}
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return out
    for tid in tids:
        name, vol, invol = "?", 0, 0
        try:
            with open(f"{base}/{tid}/status", encoding="ascii", errors="replace") as fh:
                for line in fh:
                    if line.startswith("Name:"):
                        name = line.split(":", 1)[1].strip()
                    elif line.startswith("voluntary_ctxt_switches:"):
                        vol = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        invol = int(line.split()[1])
        except OSError:
            continue
        out[int(tid)] = (name, vol, invol)
    return out


def switch_delta(
    before: dict[int, tuple[str, int, int]],
    after: dict[int, tuple[str, int, int]],
    labels: dict[int, str] | None = None,
) -> dict[str, list[int]]:
    """Switches per thread between two `thread_switches` reads, keyed by the
    thread's label (``labels[tid]``, else its kernel name; repeated names are
    numbered): ``{label: [voluntary, involuntary]}``, threads that switched only."""
    out: dict[str, list[int]] = {}
    for tid in sorted(after):
        if tid not in before:
            continue
        name, vol, invol = after[tid]
        dv, di = vol - before[tid][1], invol - before[tid][2]
        if dv == 0 and di == 0:
            continue
        label = (labels or {}).get(tid, name)
        key, k = label, 1
        while key in out:
            k += 1
            key = f"{label}#{k}"
        out[key] = [dv, di]
    return out


def _say(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _curve(sock: Any, server: bool) -> None:
    """CurveZMQ on ``sock`` when the parent handed a keypair down; plain otherwise."""
    keys = os.environ.get(_KEY_ENV)
    if not keys:
        return
    public, secret = keys.encode().split()
    if server:
        sock.curve_server = True
    else:
        sock.curve_serverkey = public
    sock.curve_publickey = public
    sock.curve_secretkey = secret


def _child_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="_raw.py --child")
    ap.add_argument("--child", required=True, choices=ROLES)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--cpus", default="")
    ap.add_argument("--max-s", type=float, required=True)
    ap.add_argument("--size", type=int, default=len(PAYLOAD), help="payload bytes (default: the 100-byte str)")
    args = ap.parse_args(argv)
    payload = PAYLOAD if args.size == len(PAYLOAD) else bytes(args.size)
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    if args.child.startswith("link"):
        return _link_child(args)
    import zmq

    ctx = zmq.Context()
    deadline = time.monotonic() + args.max_s
    out: dict[str, Any] = {}
    try:
        if args.child == "router":
            # The floor: the barest echo loop there is -- no receive timeout,
            # no check, no count per message.  It ends by count: the dealer
            # always makes exactly warmup + n round trips (the parent kills
            # a child that outlives its bound).
            sock = ctx.socket(zmq.ROUTER)
            _curve(sock, server=True)
            sock.bind(args.endpoint)
            _say({"ready": sock.last_endpoint.decode()})
            recv, send = sock.recv_multipart, sock.send_multipart
            before = thread_switches(os.getpid())
            for _ in range(args.n + args.warmup):
                send(recv(copy=False), copy=False)
            switches = switch_delta(before, thread_switches(os.getpid()), {threading.get_native_id(): "main"})
            out = {"handled": args.n + args.warmup, "switches": switches}
            sock.close(linger=int(args.max_s * 1000))  # the last answer leaves before the context goes
        elif args.child == "dealer":
            sock = ctx.socket(zmq.DEALER)
            _curve(sock, server=False)
            sock.connect(args.endpoint)
            recv, send = sock.recv, sock.send
            for _ in range(args.warmup):
                send(payload)
                recv(copy=False)
            samples: list[float] = []
            clock = time.perf_counter_ns
            n = args.n
            before = thread_switches(os.getpid())
            for i in range(n):
                t0 = clock()
                send(payload)
                recv(copy=False)
                samples.append((clock() - t0) / 1000.0)
                if not i & 255 and time.monotonic() > deadline:
                    for _ in range(n - i - 1):  # past the deadline: the rest untimed, so the router ends
                        send(payload)
                        recv(copy=False)
                    break
            switches = switch_delta(before, thread_switches(os.getpid()), {threading.get_native_id(): "main"})
            out = {"samples_us": samples, "switches": switches}
        elif args.child == "pull":
            sock = ctx.socket(zmq.PULL)
            _curve(sock, server=True)
            sock.bind(args.endpoint)
            sock.rcvtimeo = int(args.max_s * 1000)
            _say({"ready": sock.last_endpoint.decode()})
            count, t_end, t_last = 0, None, None
            recv = sock.recv
            big = args.size > 4096  # a big frame is not copied into a bytes object
            for _ in range(args.n + 1):
                try:
                    msg = recv(copy=False) if big else recv()
                except zmq.Again:
                    break
                if big:
                    msg = msg.bytes if len(msg.buffer) == len(END) else b""
                if msg == END:
                    t_end = time.monotonic()
                    break
                count += 1
                if not count & 255:
                    t_last = time.monotonic()
            out = {"count": count, "t_end": t_end, "t_last": t_last, "count_at_last": count & ~255}
        else:  # push
            sock = ctx.socket(zmq.PUSH)
            _curve(sock, server=False)
            # The connection's handshake is not part of the throughput: wait for it.
            mon = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
            sock.connect(args.endpoint)
            if not mon.poll(int(args.max_s * 1000)):
                raise RuntimeError("push: no handshake")
            sock.disable_monitor()
            mon.close(linger=0)
            send = sock.send
            t_start = time.monotonic()
            sent = 0
            for i in range(args.n):
                send(payload)
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
    # The NetLink rows measure the kernel's node-to-node link itself, below the
    # public API, so this child imports the private NetLink on purpose.
    from actors._core.net.net import NetLink
    from actors.cluster_key import ClusterKey

    public, secret = os.environ[_KEY_ENV].encode().split()
    key = ClusterKey(public, secret)
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

    def on_frame(peer: str, frames: list[bytes]) -> None:
        got.set()

    samples: list[float] = []
    with NetLink("caller", TCP_ANY, key, on_frame=on_frame) as link:
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
# Parent side
# =============================================================================


def curve_env() -> dict[str, str]:
    """An environment for children that turns CurveZMQ on, with a fresh keypair."""
    import zmq

    public, secret = zmq.curve_keypair()
    env = dict(os.environ, **{_KEY_ENV: f"{public.decode()} {secret.decode()}"})
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


class Child:
    """One raw child process, waited for with a bound; never outlives `result`."""

    def __init__(
        self,
        role: str,
        endpoint: str,
        n: int,
        max_s: float,
        cpus: Iterable[int] | None = None,
        warmup: int = 0,
        env: dict[str, str] | None = None,
        stdin: bool = False,
        size: int | None = None,
    ) -> None:
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--child",
            role,
            "--endpoint",
            endpoint,
            "--n",
            str(n),
            "--warmup",
            str(warmup),
            "--max-s",
            str(max_s),
        ]
        if size is not None:
            cmd += ["--size", str(size)]
        if cpus is not None:
            cmd += ["--cpus", ",".join(str(c) for c in sorted(cpus))]
        self.role, self.max_s = role, max_s
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stdin=subprocess.PIPE if stdin else None, text=True, env=env
        )

    def ready(self, timeout: float = 15.0) -> str:
        """The bound endpoint, once the child listens."""
        assert self.proc.stdout is not None
        readable, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if readable else ""
        try:
            return json.loads(line)["ready"]
        except (ValueError, KeyError, TypeError):
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"raw {self.role} child did not start (got {line!r})") from None

    def result(self) -> dict[str, Any]:
        try:
            stdin = "" if self.proc.stdin is not None else None  # a stdin reader stops at EOF
            stdout, _ = self.proc.communicate(stdin, timeout=self.max_s + 15.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"raw {self.role} child did not finish in time") from None
        lines = [ln for ln in stdout.splitlines() if ln.strip()]
        if self.proc.returncode != 0 or not lines:
            raise RuntimeError(f"raw {self.role} child failed (rc={self.proc.returncode})")
        return json.loads(lines[-1])


def call(
    endpoint: str,
    n: int,
    warmup: int,
    max_s: float,
    a: Iterable[int] | None = None,
    b: Iterable[int] | None = None,
    env: dict[str, str] | None = None,
    size: int | None = None,
) -> list[float]:
    """Round-trip samples (us): a DEALER on CPUs ``a`` calls a ROUTER on ``b``
    (``size`` bytes each way; default the 100-byte payload)."""
    server = Child("router", endpoint, n, max_s, b, warmup, env, size=size)
    bound = server.ready()
    try:
        samples = Child("dealer", bound, n, max_s, a, warmup, env, size=size).result()["samples_us"]
    finally:
        server.result()
    return samples


def call_switches(
    endpoint: str, n: int, warmup: int, max_s: float, a: Iterable[int] | None = None, b: Iterable[int] | None = None
) -> dict[str, dict[str, list[float]]]:
    """Context switches per round trip of the raw call loop, per thread:
    ``{"caller": {thread: [voluntary, involuntary]}, "callee": {...}}``."""
    server = Child("router", endpoint, n, max_s, b, warmup)
    bound = server.ready()
    try:
        dealer = Child("dealer", bound, n, max_s, a, warmup).result()
    finally:
        router = server.result()
    return {"caller": per_round_trip(dealer["switches"], n), "callee": per_round_trip(router["switches"], n + warmup)}


def per_round_trip(switches: dict[str, list[int]], n: int) -> dict[str, list[float]]:
    """`switch_delta`'s counts divided by the round trips they cover."""
    return {k: [round(v / n, 2) for v in vs] for k, vs in switches.items()}


def cast(
    endpoint: str,
    n: int,
    max_s: float,
    a: Iterable[int] | None = None,
    b: Iterable[int] | None = None,
    env: dict[str, str] | None = None,
    size: int | None = None,
) -> dict[str, Any]:
    """One-way throughput: a PUSH on CPUs ``a`` to a PULL on ``b``."""
    pull = Child("pull", endpoint, n, max_s, b, env=env, size=size)
    bound = pull.ready()
    try:
        sent = Child("push", bound, n, max_s, a, env=env, size=size).result()
    finally:
        got = pull.result()
    if got["t_end"] is None and got.get("t_last") is not None:
        # The sentinel was lost (the sender's linger ran out under load):
        # the rate up to the last message timed, marked as such.
        out = rate(sent["t_start"], got["count_at_last"], got["t_last"], sent["sent"])
        out["sentinel"] = False
        return out
    return rate(sent["t_start"], got["count"], got["t_end"], sent["sent"])


def link_call(n: int, warmup: int, max_s: float, env: dict[str, str]) -> list[float]:
    """Round-trip samples (us) through a `NetLink` on each side (needs `curve_env`)."""
    echo = Child("link-echo", TCP_ANY, n, max_s, env=env, stdin=True)
    bound = echo.ready()
    try:
        samples = Child("link-call", bound, n, max_s, warmup=warmup, env=env).result()["samples_us"]
    finally:
        echo.result()
    return samples


def rate(t_start: float, count: int, t_end: float | None, sent: int) -> dict[str, Any]:
    """Messages per second at the receiver; an error when the sentinel never came."""
    if t_end is None or t_end <= t_start:
        raise RuntimeError(f"cast measurement ended without its sentinel (received {count}/{sent})")
    return {
        "msgs_per_s": round(count / (t_end - t_start), 1),
        "received": count,
        "sent": sent,
        "seconds": round(t_end - t_start, 4),
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--child" in argv:
        return _child_main(argv)
    from _common import environment, median, summarize, write_json  # here, not above: the children import only zmq

    ap = argparse.ArgumentParser(description="raw pyzmq tcp+CurveZMQ baselines and the NetLink round trip")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    args = ap.parse_args(argv)
    reps = args.reps or (3 if args.quick else 5)
    n_call, n_cast, max_s = (1000, 20_000, 10.0) if args.quick else (5000, 100_000, 20.0)
    env = curve_env()
    calls, casts, links = [], [], []
    for _ in range(reps):  # interleaved, so drift hits every row alike
        calls.append(summarize(call(TCP_ANY, n_call, n_call // 10, max_s, env=env)))
        casts.append(cast(TCP_ANY, n_cast, max_s, env=env)["msgs_per_s"])
        links.append(summarize(link_call(n_call, n_call // 10, max_s, env)))
    figures = {
        "raw_tcp_curve_call": {
            "p50_us": median(c["p50_us"] for c in calls),
            "p99_us": median(c["p99_us"] for c in calls),
            "reps": calls,
        },
        "raw_tcp_curve_cast": {"msgs_per_s": round(median(casts)), "reps": casts},
        "netlink_call": {
            "p50_us": median(c["p50_us"] for c in links),
            "p99_us": median(c["p99_us"] for c in links),
            "reps": links,
        },
    }
    print(f"tcp 127.0.0.1, CurveZMQ on, {len(PAYLOAD)}-byte payload, median of {reps} repetitions")
    print(f"{'row':<22}{'p50 us':>10}{'p99 us':>10}{'msg/s':>12}")
    for label, key in (("raw call (DEALER)", "raw_tcp_curve_call"), ("NetLink call", "netlink_call")):
        row = figures[key]
        print(f"{label:<22}{row['p50_us']:>10.1f}{row['p99_us']:>10.1f}{'':>12}")
    print(f"{'raw cast (PUSH)':<22}{'':>10}{'':>10}{figures['raw_tcp_curve_cast']['msgs_per_s']:>12,}")
    path = write_json(
        "raw",
        {
            "environment": environment(),
            "reps": reps,
            "n_call": n_call,
            "n_cast": n_cast,
            "payload_bytes": len(PAYLOAD),
            **figures,
        },
    )
    print(f"wrote {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
