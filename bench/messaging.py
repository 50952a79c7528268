"""Kernel messaging benchmark: actor call/cast against raw pyzmq, per CPU placement.

Run ``python bench/messaging.py`` (about 2 minutes) or ``--quick`` (about 30 s).

Side by side, with the same ~100-byte str payload, for each placement
(unpinned, both sides on one core, on two cores):

* call round trip
  - ``raw``:    pyzmq DEALER -> ROUTER -> DEALER between two Python processes
                over ipc (the floor an actor call is compared with);
  - ``actor``:  actor A in host process 1 calls actor B in host process 2, the
                loop running inside A's ``handle_call`` (actor to actor);
  - ``main``:   the host program's main thread calls B in a host process;
  - ``local``:  two actors in one host process (no ZeroMQ, thread hops only);
* one-way cast throughput, one send per message, measured at the receiver
  (messages received / time from the sender's first send to the receiver
  handling the end sentinel; both stamps are CLOCK_MONOTONIC, shared by
  every process of the machine)
  - ``raw``:    pyzmq PUSH -> PULL between two Python processes;
  - ``actor``:  A casts to B across host processes;
  - ``local``:  A casts to B inside one host process.

Each measurement is repeated ``--reps`` times, interleaved raw/actor so that
drift hits both alike, and the median of the repetitions is reported.
Every loop is bounded by a count and a deadline.  Results go to stdout
(table), ``bench/results/messaging.json`` and stderr (progress).

The raw sides run in small child processes started from this same file
(``--child ROLE``), pinned with ``os.sched_setaffinity`` like the hosts.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Exactly 100 characters (100 bytes in UTF-8), a str as the issue asks.
PAYLOAD = ("benchmark payload " + "0123456789" * 9)[:100]
END = "__bench_end__"

TARGETS = {"call_p50_ratio_max": 1.5, "cast_rate_ratio_min": 0.25}


# =============================================================================
# Raw pyzmq children (no actors imported: they start in ~50 ms)
# =============================================================================


def _child_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="messaging.py --child")
    ap.add_argument("--child", required=True, choices=["rep-server", "rep-client", "pull", "push"])
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--cpus", default="")
    ap.add_argument("--max-s", type=float, required=True)
    args = ap.parse_args(argv)
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    import zmq

    ctx = zmq.Context()
    deadline = time.monotonic() + args.max_s
    payload = PAYLOAD.encode()
    out: dict[str, Any] = {}
    try:
        if args.child == "rep-server":
            sock = ctx.socket(zmq.ROUTER)
            sock.bind(args.endpoint)
            _ready()
            sock.setsockopt(zmq.RCVTIMEO, int(args.max_s * 1000))
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
        elif args.child == "rep-client":
            sock = ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.RCVTIMEO, int(args.max_s * 1000))
            sock.connect(args.endpoint)
            for _ in range(args.warmup):
                sock.send(payload)
                sock.recv()
            samples: list[float] = []
            clock = time.perf_counter_ns
            for i in range(args.n):
                t0 = clock()
                sock.send(payload)
                sock.recv()
                samples.append((clock() - t0) / 1000.0)
                if not i & 255 and time.monotonic() > deadline:
                    break
            sock.send(b"stop")
            sock.recv()
            out = {"samples_us": samples}
        elif args.child == "pull":
            sock = ctx.socket(zmq.PULL)
            sock.bind(args.endpoint)
            _ready()
            sock.setsockopt(zmq.RCVTIMEO, int(args.max_s * 1000))
            count = 0
            t_end = None
            end = END.encode()
            recv = sock.recv
            for _ in range(args.n + 1):
                try:
                    msg = recv()
                except zmq.Again:
                    break
                if msg == end:
                    t_end = time.monotonic()
                    break
                count += 1
            out = {"count": count, "t_end": t_end}
        else:  # push
            sock = ctx.socket(zmq.PUSH)
            sock.connect(args.endpoint)
            send = sock.send
            t_start = time.monotonic()
            sent = 0
            for i in range(args.n):
                send(payload)
                sent += 1
                if not i & 4095 and time.monotonic() > deadline:
                    break
            sock.send(END.encode())
            out = {"t_start": t_start, "sent": sent}
            sock.close(linger=int(args.max_s * 1000))
    finally:
        ctx.destroy(linger=0)
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


def _ready() -> None:
    sys.stdout.write("ready\n")
    sys.stdout.flush()


class _Child:
    """One raw pyzmq child process, waited for with a bound."""

    def __init__(self, role: str, endpoint: str, n: int, cpus: frozenset[int] | None,
                 max_s: float, warmup: int = 0) -> None:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", role, "--endpoint", endpoint,
               "--n", str(n), "--warmup", str(warmup), "--max-s", str(max_s)]
        if cpus is not None:
            cmd += ["--cpus", ",".join(str(c) for c in sorted(cpus))]
        self.role = role
        self.max_s = max_s
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)

    def wait_ready(self, timeout: float = 10.0) -> None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"raw {self.role} child did not start (got {line!r})")

    def result(self) -> dict[str, Any]:
        try:
            stdout, _ = self.proc.communicate(timeout=self.max_s + 10.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"raw {self.role} child did not finish in time") from None
        lines = [ln for ln in stdout.splitlines() if ln.strip()]
        if self.proc.returncode != 0 or not lines:
            raise RuntimeError(f"raw {self.role} child failed (rc={self.proc.returncode})")
        return json.loads(lines[-1])


def raw_call(endpoint: str, pl: Any, n: int, warmup: int, max_s: float) -> list[float]:
    server = _Child("rep-server", endpoint, n, pl.b, max_s, warmup)
    server.wait_ready()
    client = _Child("rep-client", endpoint, n, pl.a, max_s, warmup)
    samples = client.result()["samples_us"]
    server.result()
    return samples


def raw_cast(endpoint: str, pl: Any, n: int, max_s: float) -> dict[str, Any]:
    pull = _Child("pull", endpoint, n, pl.b, max_s)
    pull.wait_ready()
    push = _Child("push", endpoint, n, pl.a, max_s)
    sent = push.result()
    got = pull.result()
    return _rate(sent["t_start"], got["count"], got["t_end"], sent["sent"])


def _rate(t_start: float, count: int, t_end: float | None, sent: int) -> dict[str, Any]:
    if t_end is None or t_end <= t_start:
        raise RuntimeError(f"cast measurement ended without its sentinel (received {count}/{sent})")
    return {"msgs_per_s": round(count / (t_end - t_start), 1), "received": count, "sent": sent,
            "seconds": round(t_end - t_start, 4)}


# =============================================================================
# Actors (defined here, shipped to the hosts by value with cloudpickle)
# =============================================================================


def _actor_classes() -> tuple[type, type, type]:
    from actors import GenServer

    class Echo(GenServer):
        """Answers every call with its request: the far end of a round trip."""

        def handle_call(self, request: Any, from_: Any) -> Any:
            return request

    class Sink(GenServer):
        """Counts casts until the end sentinel, stamping when it arrives."""

        def init(self) -> None:
            self.count = 0
            self.t_end = None

        def handle_cast(self, request: Any) -> None:
            if request == "__bench_end__":
                self.t_end = time.monotonic()
            else:
                self.count += 1

        def handle_call(self, request: Any, from_: Any) -> Any:
            result = [self.count, self.t_end]
            self.count = 0
            self.t_end = None
            return result

    class Driver(GenServer):
        """Runs a measurement loop inside its own handle_call (actor to actor)."""

        def handle_call(self, request: Any, from_: Any) -> Any:
            op, target, n, warmup, max_s, payload = request
            deadline = time.monotonic() + max_s
            if op == "calls":
                call = target.call
                for _ in range(warmup):
                    call(payload, timeout=10.0)
                clock = time.perf_counter_ns
                samples = []
                for i in range(n):
                    t0 = clock()
                    call(payload, timeout=10.0)
                    samples.append((clock() - t0) / 1000.0)
                    if not i & 255 and time.monotonic() > deadline:
                        break
                return samples
            if op == "casts":
                cast = target.cast
                t_start = time.monotonic()
                sent = 0
                for i in range(n):
                    cast(payload)
                    sent += 1
                    if not i & 4095 and time.monotonic() > deadline:
                        break
                cast("__bench_end__")
                count, t_end = target.call("result", timeout=max_s + 10.0)
                return [t_start, count, t_end, sent]
            raise ValueError(f"unknown driver op {op!r}")

    return Echo, Sink, Driver


def main_calls(target: Any, n: int, warmup: int, max_s: float) -> list[float]:
    """Round trips from the host program's main thread."""
    call = target.call
    for _ in range(warmup):
        call(PAYLOAD, timeout=10.0)
    deadline = time.monotonic() + max_s
    clock = time.perf_counter_ns
    samples = []
    for i in range(n):
        t0 = clock()
        call(PAYLOAD, timeout=10.0)
        samples.append((clock() - t0) / 1000.0)
        if not i & 255 and time.monotonic() > deadline:
            break
    return samples


# =============================================================================
# The run
# =============================================================================


def _modes(quick: bool) -> dict[str, Any]:
    if quick:
        return {"call_n": 3000, "warmup": 200, "cast_n": 50_000, "reps": 2, "max_s": 4.0}
    return {"call_n": 10_000, "warmup": 500, "cast_n": 200_000, "reps": 3, "max_s": 10.0}


CALL_KINDS = ("raw", "actor", "main", "local")
CAST_KINDS = ("raw", "actor", "local")


def run(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, ROOT)
    from _common import Progress, environment, median, pin_process, placements, summarize

    from actors import Node

    cfg = _modes(args.quick)
    for key in ("call_n", "cast_n", "reps"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    env = environment()  # before the run: its load average says how busy the machine was
    pls = placements(args.placement)
    Echo, Sink, Driver = _actor_classes()
    per_rep = len(CALL_KINDS) + len(CAST_KINDS)
    bar = Progress(len(pls) * cfg["reps"] * per_rep + len(pls), "messaging")
    tmp = tempfile.mkdtemp(prefix="bench-msg-")
    os.chmod(tmp, 0o700)
    results: dict[str, Any] = {}
    try:
        with Node() as node:
            for pl in pls:
                a_cpus = set(pl.a) if pl.a else None
                b_cpus = set(pl.b) if pl.b else None
                both = set(pl.both) if pl.both else None
                driver = node.spawn(Driver, host=f"a-{pl.label}", cpus=a_cpus)
                echo = node.spawn(Echo, host=f"b-{pl.label}", cpus=b_cpus)
                sink = node.spawn(Sink, host=f"b-{pl.label}", cpus=b_cpus)
                l_driver = node.spawn(Driver, host=f"l-{pl.label}", cpus=both)
                l_echo = node.spawn(Echo, host=f"l-{pl.label}", cpus=both)
                l_sink = node.spawn(Sink, host=f"l-{pl.label}", cpus=both)
                bar.step(f"{pl.label}: hosts up")
                calls: dict[str, list[dict[str, float]]] = {k: [] for k in CALL_KINDS}
                casts: dict[str, list[dict[str, Any]]] = {k: [] for k in CAST_KINDS}
                n, w, cn, mx = cfg["call_n"], cfg["warmup"], cfg["cast_n"], cfg["max_s"]
                big = mx + 30.0
                for rep in range(cfg["reps"]):
                    tag = f"{pl.label} rep {rep + 1}/{cfg['reps']}"
                    ep = f"ipc://{tmp}/raw-{pl.label}-{rep}.sock"
                    calls["raw"].append(summarize(raw_call(ep, pl, n, w, mx)))
                    bar.step(f"{tag}: raw call")
                    s = driver.call(("calls", echo, n, w, mx, PAYLOAD), timeout=big)
                    calls["actor"].append(summarize(s))
                    bar.step(f"{tag}: actor call")
                    pin_process(pl.a)
                    try:
                        calls["main"].append(summarize(main_calls(echo, n, w, mx)))
                    finally:
                        pin_process(None)
                    bar.step(f"{tag}: main->actor call")
                    s = l_driver.call(("calls", l_echo, n, w, mx, PAYLOAD), timeout=big)
                    calls["local"].append(summarize(s))
                    bar.step(f"{tag}: local call")
                    casts["raw"].append(raw_cast(ep, pl, cn, mx))
                    bar.step(f"{tag}: raw cast")
                    t0, count, t_end, sent = driver.call(("casts", sink, cn, 0, mx, PAYLOAD), timeout=big)
                    casts["actor"].append(_rate(t0, count, t_end, sent))
                    bar.step(f"{tag}: actor cast")
                    t0, count, t_end, sent = l_driver.call(("casts", l_sink, cn, 0, mx, PAYLOAD),
                                                           timeout=big)
                    casts["local"].append(_rate(t0, count, t_end, sent))
                    bar.step(f"{tag}: local cast")
                for ref in (driver, echo, sink, l_driver, l_echo, l_sink):
                    node.stop(ref, timeout=10.0)
                results[pl.label] = _aggregate(pl, calls, casts, median)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "bench": "messaging",
        "mode": "quick" if args.quick else "full",
        "config": cfg,
        "payload": {"type": "str", "bytes": len(PAYLOAD.encode())},
        "targets": TARGETS,
        "environment": env,
        "placements": results,
    }


def _aggregate(pl: Any, calls: dict[str, list[dict[str, float]]], casts: dict[str, list[dict[str, Any]]],
               median: Any) -> dict[str, Any]:
    call_out = {}
    for kind, reps in calls.items():
        call_out[kind] = {
            "p50_us": round(median(r["p50_us"] for r in reps), 2),
            "p99_us": round(median(r["p99_us"] for r in reps), 2),
            "reps": reps,
        }
    cast_out = {}
    for kind, reps in casts.items():
        cast_out[kind] = {"msgs_per_s": round(median(r["msgs_per_s"] for r in reps), 1), "reps": reps}
    raw50 = call_out["raw"]["p50_us"]
    raw_rate = cast_out["raw"]["msgs_per_s"]
    ratios = {
        "call_actor_p50": round(call_out["actor"]["p50_us"] / raw50, 2),
        "call_main_p50": round(call_out["main"]["p50_us"] / raw50, 2),
        "call_local_p50": round(call_out["local"]["p50_us"] / raw50, 2),
        "call_actor_p99": round(call_out["actor"]["p99_us"] / call_out["raw"]["p99_us"], 2),
        "cast_actor_rate": round(cast_out["actor"]["msgs_per_s"] / raw_rate, 3),
        "cast_local_rate": round(cast_out["local"]["msgs_per_s"] / raw_rate, 3),
    }
    ratios["call_target_met"] = ratios["call_actor_p50"] <= TARGETS["call_p50_ratio_max"]
    ratios["cast_target_met"] = ratios["cast_actor_rate"] >= TARGETS["cast_rate_ratio_min"]
    cpus = {"a": sorted(pl.a) if pl.a else None, "b": sorted(pl.b) if pl.b else None}
    return {"cpus": cpus, "call": call_out, "cast": cast_out, "ratios": ratios}


def report(data: dict[str, Any]) -> str:
    lines = [f"messaging benchmark ({data['mode']}, payload {data['payload']['bytes']} B str, "
             f"median of {data['config']['reps']} reps; {data['environment'].get('cpu_model', '?')}, "
             f"{len(data['environment']['cpus_allowed'])} CPUs)", "",
             "call round trip, p50 / p99 in us (ratio = p50 / raw p50)"]
    head = f"{'placement':<10} " + " ".join(f"{k:>22}" for k in CALL_KINDS)
    lines += [head, "-" * len(head)]
    for label, r in data["placements"].items():
        cells = []
        raw50 = r["call"]["raw"]["p50_us"]
        for k in CALL_KINDS:
            c = r["call"][k]
            ratio = "" if k == "raw" else f" x{c['p50_us'] / raw50:.2f}"
            cells.append(f"{c['p50_us']:7.1f} /{c['p99_us']:7.1f}{ratio:>6}")
        lines.append(f"{label:<10} " + " ".join(f"{c:>22}" for c in cells))
    lines += ["", "one-way cast throughput, messages/s (ratio = / raw)"]
    head = f"{'placement':<10} " + " ".join(f"{k:>20}" for k in CAST_KINDS)
    lines += [head, "-" * len(head)]
    for label, r in data["placements"].items():
        raw = r["cast"]["raw"]["msgs_per_s"]
        cells = []
        for k in CAST_KINDS:
            v = r["cast"][k]["msgs_per_s"]
            ratio = "" if k == "raw" else f" x{v / raw:.3f}"
            cells.append(f"{v:>11,.0f}{ratio:>8}")
        lines.append(f"{label:<10} " + " ".join(f"{c:>20}" for c in cells))
    env = data["environment"]
    if env.get("loadavg_1m", 0) > len(env["cpus_allowed"]) / 2:
        lines += ["", f"WARNING: load average {env['loadavg_1m']} at start on {len(env['cpus_allowed'])} CPUs: "
                  "other work shares these cores, latencies are inflated and noisy"]
    lines += ["", f"targets: actor call p50 <= {TARGETS['call_p50_ratio_max']}x raw, "
              f"actor cast >= {TARGETS['cast_rate_ratio_min']}x raw"]
    for label, r in data["placements"].items():
        q = r["ratios"]
        lines.append(f"  {label:<10} call x{q['call_actor_p50']:.2f} "
                     f"{'met' if q['call_target_met'] else 'MISSED'}   "
                     f"cast x{q['cast_actor_rate']:.3f} {'met' if q['cast_target_met'] else 'MISSED'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--child" in argv:
        return _child_main(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer messages and reps (~30 s)")
    ap.add_argument("--placement", action="append", help="only this placement (repeatable)")
    ap.add_argument("--reps", type=int, help="repetitions per measurement")
    ap.add_argument("--call-n", type=int, help="timed round trips per repetition")
    ap.add_argument("--cast-n", type=int, help="casts per repetition")
    ap.add_argument("--no-write", action="store_true", help="do not write bench/results/messaging.json")
    args = ap.parse_args(argv)
    for key in ("reps", "call_n", "cast_n"):
        value = getattr(args, key)
        if value is not None and value <= 0:
            ap.error(f"--{key.replace('_', '-')} must be positive, got {value}")
    data = run(args)
    print(report(data))
    if not args.no_write:
        from _common import plot_bars, write_json

        path = write_json("messaging", data)
        print(f"\nwrote {os.path.relpath(path, ROOT)}")
        groups = {label: {k: r["call"][k]["p50_us"] for k in CALL_KINDS}
                  for label, r in data["placements"].items()}
        png = plot_bars("messaging", "call p50 (us)", groups, "us")
        if png:
            print(f"wrote {os.path.relpath(png, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
