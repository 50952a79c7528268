"""Kernel messaging benchmark: actor call/cast against raw pyzmq, per CPU placement.

Run ``python bench/messaging.py`` (about 3 minutes) or ``--quick`` (about
40 s); ``--section ipc`` or ``--section tcp`` runs one half.

Side by side, with the same 100-byte str payload, for each placement
(unpinned, both sides on one core, on two cores):

* call round trip, processes of one node (``ipc`` section)
  - ``raw``:    pyzmq DEALER -> ROUTER -> DEALER between two Python processes
                over ipc (the floor an actor call is compared with);
  - ``actor``:  actor A in host process 1 calls actor B in host process 2, the
                loop running inside A's ``handle_call`` (actor to actor);
  - ``main``:   the host program's main thread calls B in a host process;
  - ``local``:  two actors in one host process (no ZeroMQ, thread hops only);
* call round trip between two nodes (``tcp`` section; node b is a separate
  OS process started from this file with ``--node-b``, both nodes hold one
  cluster key, so every frame between them is CurveZMQ-encrypted)
  - ``tcp_raw``:   the same DEALER/ROUTER loop over tcp on 127.0.0.1 with
                   CurveZMQ on;
  - ``tcp_actor``: A (host process of node a) calls B (host process of node b);
  - ``tcp_main``:  node a's main thread calls B on node b;
* one-way cast throughput, one send per message, measured at the receiver
  (messages received / time from the sender's first send to the receiver
  handling the end sentinel; both stamps are CLOCK_MONOTONIC, shared by
  every process of the machine)
  - ``raw`` / ``tcp_raw``: pyzmq PUSH -> PULL (ipc / tcp with CurveZMQ);
  - ``actor`` / ``tcp_actor``: A casts to B across host processes / nodes;
  - ``local``:  A casts to B inside one host process.

Three more sections (``--section payloads``, ``--section bulk``,
``--section handoffs``; every section runs by default):

* ``payloads``: actor to actor call and cast, across hosts (ipc) and across
  nodes (tcp), with a 100 B ``str``, 100 B ``bytes``, a small dict, a small
  dataclass (from ``bench/_payloads.py``, reported without a target), and
  ``bytes`` of 64 KB and 1 MB, each against the raw loop of the same size
  (fewer messages for the big ones).  In the cast rows each message is a
  distinct object of the payload's shape, built in the loop;
* ``bulk``: the small call across nodes alone, then while another actor
  streams 1 MB casts between the same two nodes (p50 / p99), from a host
  of its own and from the streamer's host process;
* ``handoffs``: context switches per round trip of the ipc call, raw and
  actor to actor, counted per thread of the caller's and the callee's
  process from ``/proc/<pid>/task/*/status`` before and after the loop.
  On one core every switch is a hand-off from one thread to another.

The raw call floor is the barest loop: no receive timeout and nothing done
per message on the echo side; it ends by count.

Each measurement is repeated ``--reps`` times, interleaved raw/actor so that
drift hits both alike, and the median of the repetitions is reported.
Every loop is bounded by a count and a deadline.  Results go to stdout
(table), ``bench/results/messaging.json`` and stderr (progress).

The raw sides are the loops of ``bench/_raw.py``, run as small child
processes pinned with ``os.sched_setaffinity`` like the hosts.
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import _raw  # bench/_raw.py, a sibling script, not a package
from _common import Progress, environment, median, pin_process, placements, plot_bars, summarize, write_json

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Every row sends the same str: exactly 100 characters (100 bytes in UTF-8).
PAYLOAD = _raw.PAYLOAD_STR
END = _raw.END.decode()

TARGETS = {
    "call_p50_ratio_max": 1.5,  # actor -> actor, in a node (ipc) and across nodes (tcp)
    "cast_rate_ratio_min": 0.25,  # in a node
    "tcp_main_call_p50_ratio_max": 1.7,  # a host program's thread -> an actor of another node
    "tcp_cast_rate_ratio_min": 0.5,  # across nodes
    "tcp_mb_rate_ratio_min": 0.7,  # 1 MB casts across nodes, MB/s
}


def _cast_floor(transport: str, size: int = 0) -> float:
    """The least cast rate ratio a row must reach (`TARGETS`): across nodes
    0.5x (0.7x for 1 MB messages), in a node 0.25x."""
    if transport != "tcp":
        return TARGETS["cast_rate_ratio_min"]
    return TARGETS["tcp_mb_rate_ratio_min"] if size >= 1 << 20 else TARGETS["tcp_cast_rate_ratio_min"]


# =============================================================================
# Raw pyzmq baselines (bench/_raw.py: one set of loops for ipc and tcp+Curve)
# =============================================================================


def raw_call(
    endpoint: str, pl: Any, n: int, warmup: int, max_s: float, env: dict[str, str] | None = None
) -> list[float]:
    return _raw.call(endpoint, n, warmup, max_s, pl.a, pl.b, env)


def raw_cast(endpoint: str, pl: Any, n: int, max_s: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    return _raw.cast(endpoint, n, max_s, pl.a, pl.b, env)


_rate = _raw.rate


# =============================================================================
# The second node of the cross-node rows: a separate OS process
# =============================================================================


def _node_b_main(argv: list[str]) -> int:
    """``--node-b KEY``: a node named b listening on 127.0.0.1, until stdin closes."""
    from actors import Node

    with Node(name="b", listen="tcp://127.0.0.1:0", cluster_key=argv[argv.index("--node-b") + 1]) as node:
        sys.stdout.write(f"ADDR {node.address}\n")
        sys.stdout.flush()
        sys.stdin.read()
    return 0


class _NodeB:
    """Node b in its own process: started, waited for, closed with a bound."""

    def __init__(self, key: str) -> None:
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--node-b", key],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 60.0)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("ADDR "):
            self.close()
            raise RuntimeError(f"node b did not start (got {line!r})")
        self.address = line.split()[1]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.communicate("", timeout=30.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        elif self.proc.stdout is not None:
            self.proc.stdout.close()
            if self.proc.stdin is not None:
                self.proc.stdin.close()


# =============================================================================
# Actors (defined here, shipped to the hosts by value with cloudpickle)
# =============================================================================


def _actor_classes() -> tuple[type, type, type]:
    from _payloads import variant

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
            if request == "threads":  # for the hand-off count: this host's pid and thread names
                names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
                return [os.getpid(), names, threading.get_native_id()]
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
            if op == "casts" or op == "distinct_casts":
                cast = target.cast
                make = variant if op == "distinct_casts" else (lambda p, i: p)
                t_start = time.monotonic()
                sent = 0
                for i in range(n):
                    cast(make(payload, i))
                    sent += 1
                    if not i & 4095 and time.monotonic() > deadline:
                        break
                cast("__bench_end__")
                count, t_end = target.call("result", timeout=max_s + 10.0)
                return [t_start, count, t_end, sent]
            if op == "switches":
                # Context switches of every thread of this host and of the
                # target's host (``payload``: the request and an actor of
                # the target's host, for its pid) over n round trips.
                request, peer = payload
                peer_pid, peer_names, peer_self = peer.call("threads", timeout=10.0)
                peer_names[peer_self] = "the other actor's thread (idle)"
                call = target.call
                for _ in range(warmup):
                    call(request, timeout=10.0)
                me = os.getpid()
                names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
                names[threading.get_native_id()] = "caller (actor thread)"
                before, peer_before = _raw.thread_switches(me), _raw.thread_switches(peer_pid)
                done = 0
                for i in range(n):
                    call(request, timeout=10.0)
                    done += 1
                    if not i & 255 and time.monotonic() > deadline:
                        break
                after, peer_after = _raw.thread_switches(me), _raw.thread_switches(peer_pid)
                return [
                    done,
                    _raw.switch_delta(before, after, names),
                    _raw.switch_delta(peer_before, peer_after, peer_names),
                ]
            if op == "stream":
                # A bulk stream for the latency-under-load row: casts until
                # the deadline, then waits for the sink to have them all.
                cast = target.cast
                sent = 0
                for i in range(n):
                    cast(variant(payload, i))  # distinct: a batch pickles one object once
                    sent += 1
                    if time.monotonic() > deadline:
                        break
                cast("__bench_end__")
                count, _t_end = target.call("result", timeout=max_s + 60.0)
                return [sent, count]
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


#: Rows per placement.  ``ipc``: processes of one node; ``tcp``: two nodes
#: (separate OS processes) over tcp on 127.0.0.1 with CurveZMQ on.
CALL_KINDS = {"ipc": ("raw", "actor", "main", "local"), "tcp": ("tcp_raw", "tcp_actor", "tcp_main")}
CAST_KINDS = {"ipc": ("raw", "actor", "local"), "tcp": ("tcp_raw", "tcp_actor")}
#: Sections beyond the str rows: ``payloads`` (actor to actor across hosts
#: and across nodes, call and cast, per payload kind and size, each against
#: the raw loop of the same size) and ``bulk`` (a small call across nodes
#: while another actor streams 1 MB casts between the same two nodes).
#: ``handoffs``: context switches per round trip of the ipc call, raw and
#: actor to actor, per thread of the caller's and the callee's process.
SECTIONS = ("ipc", "tcp", "payloads", "bulk", "handoffs")


def _scaled(n: int, size: int, floor: int) -> int:
    """Fewer messages for bigger payloads: about the same bytes per row."""
    if size <= 100:
        return n
    return max(floor, n * 100 // size * 8)


def payload_steps(
    cfg: dict[str, Any],
    pl: Any,
    tmp: str,
    curve: dict[str, str],
    sections: tuple[str, ...],
    driver: Any,
    targets: dict[str, Any],
    out: dict[str, Any],
    summarize: Any,
) -> list[tuple[str, Any]]:
    """The payload rows' measurements, as (label, thunk) steps.  ``targets``:
    echo/sink per transport (``ipc`` and, with node b, ``tcp``)."""
    from _payloads import payloads

    steps: list[tuple[str, Any]] = []
    n, w, cn, mx = cfg["call_n"], cfg["warmup"], cfg["cast_n"], cfg["max_s"]
    big = mx + 60.0
    rows = payloads(PAYLOAD)
    for transport in [t for t in ("ipc", "tcp") if t in targets]:
        env = curve if transport == "tcp" else None
        for size in sorted({size for _, size in rows.values()}):
            ncall, ncast = _scaled(n, size, 50), _scaled(cn, size, 200)

            def raw_calls(transport=transport, size=size, ncall=ncall, env=env) -> None:
                ep = _raw.TCP_ANY if transport == "tcp" else f"ipc://{tmp}/raw-p-{pl.label}-{size}.sock"
                got = summarize(_raw.call(ep, ncall, min(w, ncall), mx, pl.a, pl.b, env, size=size))
                out.setdefault(f"{transport} call raw {size}", []).append(got)

            def raw_casts(transport=transport, size=size, ncast=ncast, env=env) -> None:
                ep = _raw.TCP_ANY if transport == "tcp" else f"ipc://{tmp}/raw-pc-{pl.label}-{size}.sock"
                got = _raw.cast(ep, ncast, mx, pl.a, pl.b, env, size=size)
                out.setdefault(f"{transport} cast raw {size}", []).append(got)

            steps += [(f"{transport} raw call {size} B", raw_calls), (f"{transport} raw cast {size} B", raw_casts)]
            for name, (payload, row_size) in rows.items():
                if row_size != size:
                    continue
                echo, sink = targets[transport]

                def actor_calls(transport=transport, name=name, payload=payload, ncall=ncall, echo=echo) -> None:
                    got = summarize(driver.call(("calls", echo, ncall, min(w, ncall), mx, payload), timeout=big))
                    out.setdefault(f"{transport} call {name}", []).append(got)

                def actor_casts(transport=transport, name=name, payload=payload, ncast=ncast, sink=sink) -> None:
                    t0, count, t_end, sent = driver.call(("distinct_casts", sink, ncast, 0, mx, payload), timeout=big)
                    out.setdefault(f"{transport} cast {name}", []).append(_rate(t0, count, t_end, sent))

                steps += [(f"{transport} call {name}", actor_calls), (f"{transport} cast {name}", actor_casts)]
    return steps


def handoff_steps(
    cfg: dict[str, Any], pl: Any, ep: str, driver: Any, echo: Any, sink: Any, out: dict[str, list[Any]]
) -> list[tuple[str, Any]]:
    """Context switches per round trip of the ipc call: the raw loop, and
    actor to actor (``driver`` calls ``echo``; ``sink`` lives in echo's host)."""
    n, w, mx = cfg["call_n"], cfg["warmup"], cfg["max_s"]

    def raw() -> None:
        out.setdefault("raw", []).append(_raw.call_switches(ep, n, w, mx, pl.a, pl.b))

    def actor() -> None:
        # The node process too (this one): it is not on the path, and its
        # count says so (its main thread's own call to the driver included).
        before = _raw.thread_switches(os.getpid())
        done, caller, callee = driver.call(("switches", echo, n, w, mx, (PAYLOAD, sink)), timeout=mx + 30.0)
        node = _raw.switch_delta(before, _raw.thread_switches(os.getpid()))
        out.setdefault("actor", []).append(
            {
                "caller": _raw.per_round_trip(caller, done),
                "callee": _raw.per_round_trip(callee, done),
                "node": _raw.per_round_trip(node, done + w),
            }
        )

    return [("hand-offs raw", raw), ("hand-offs actor", actor)]


def _switch_total(rep: dict[str, dict[str, list[float]]], which: int | None = None) -> float:
    """Switches per round trip over every thread of both sides (``which``:
    0 voluntary only, 1 involuntary only, None both)."""
    return round(sum(sum(v) if which is None else v[which] for side in rep.values() for v in side.values()), 2)


def _aggregate_handoffs(out: dict[str, list[Any]], median: Any) -> dict[str, Any]:
    """Per kind: median switches per round trip (all, voluntary), and the reps' per-thread counts."""
    return {
        kind: {
            "switches_per_rt": median(_switch_total(r) for r in reps),
            "voluntary_per_rt": median(_switch_total(r, 0) for r in reps),
            "reps": reps,
        }
        for kind, reps in out.items()
    }


def _report_handoffs(data: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "thread hand-offs (context switches) per round trip of the ipc call, caller + callee processes "
        "(voluntary + involuntary; per thread: first rep, voluntary/involuntary)",
    ]
    for label, r in data["placements"].items():
        h = r.get("handoffs")
        if not h:
            continue
        for kind in ("raw", "actor"):
            if kind not in h:
                continue
            rep = h[kind]["reps"][0]
            detail = "; ".join(
                f"{side}: " + ", ".join(f"{t} {v[0]:g}/{v[1]:g}" for t, v in threads.items() if sum(v) >= 0.05)
                for side, threads in rep.items()
            )
            lines.append(
                f"{label:<10} {kind:<6} {h[kind]['switches_per_rt']:5.2f} "
                f"({h[kind]['voluntary_per_rt']:.2f} voluntary)   {detail}"
            )
    return lines


def bulk_step(
    cfg: dict[str, Any],
    driver: Any,
    streamer: Any,
    echo: Any,
    sink: Any,
    out: dict[str, Any],
    summarize: Any,
    neighbour: Any = None,
) -> Any:
    """A small call across nodes, alone and while ``streamer`` casts 1 MB
    messages to ``sink`` on the same node pair (p50/p99 of both).  With
    ``neighbour`` (a driver in the streamer's own host process), once more
    from there: a host's frames to one node share one connection."""
    from _payloads import MB

    n, w, mx = cfg["call_n"], cfg["warmup"], cfg["max_s"]

    def loaded(caller: Any) -> dict[str, Any]:
        caller.call(("calls", echo, w, 0, mx, PAYLOAD), timeout=mx + 60.0)  # warm, before the stream
        result: list[Any] = []
        stream = threading.Thread(
            target=lambda: result.append(
                streamer.call(("stream", sink, 1_000_000, 0, mx + 1.0, bytes(MB)), timeout=mx + 120.0)
            ),
            daemon=True,
        )
        stream.start()
        got = summarize(caller.call(("calls", echo, n, 0, mx, PAYLOAD), timeout=mx + 60.0))
        stream.join(timeout=mx + 130.0)
        sent, received = result[0] if result else (0, 0)
        return {**got, "bulk_mb_sent": sent, "bulk_mb_received": received}

    def run() -> None:
        out.setdefault("quiet", []).append(
            summarize(driver.call(("calls", echo, n, w, mx, PAYLOAD), timeout=mx + 60.0))
        )
        out.setdefault("during bulk", []).append(loaded(driver))
        if neighbour is not None:
            out.setdefault("during bulk, same host", []).append(loaded(neighbour))

    return run


def run(args: argparse.Namespace) -> dict[str, Any]:
    from actors import Node
    from actors.cluster_key import write_new

    cfg = _modes(args.quick)
    for key in ("call_n", "cast_n", "reps"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    sections = SECTIONS if not args.section else tuple(args.section)
    env = environment()  # before the run: its load average says how busy the machine was
    pls = placements(args.placement)
    Echo, Sink, Driver = _actor_classes()
    per_rep = sum(len(CALL_KINDS[s]) + len(CAST_KINDS[s]) for s in sections if s in CALL_KINDS)
    per_rep += (34 if "payloads" in sections else 0) + (1 if "bulk" in sections else 0)
    per_rep += 2 if "handoffs" in sections else 0
    bar = Progress(len(pls) * cfg["reps"] * per_rep + len(pls) + 1, "messaging")
    tmp = tempfile.mkdtemp(prefix="bench-msg-")
    os.chmod(tmp, 0o700)
    results: dict[str, Any] = {}
    node_b: _NodeB | None = None
    curve = _raw.curve_env()  # the raw tcp rows' keypair
    try:
        key = os.path.join(tmp, "cluster.key")
        write_new(key)
        if {"tcp", "payloads", "bulk"} & set(sections):
            node_b = _NodeB(key)
        cluster = {"name": "a", "listen": _raw.TCP_ANY, "cluster_key": key} if node_b else {}
        with Node(**cluster) as node:
            if node_b is not None:
                node.connect(node_b.address, timeout=30.0)
            bar.step("nodes up")
            for pl in pls:
                a_cpus = set(pl.a) if pl.a else None
                b_cpus = set(pl.b) if pl.b else None
                both = set(pl.both) if pl.both else None
                driver = node.spawn(Driver, host=f"a-{pl.label}", cpus=a_cpus)
                refs = [driver]
                if {"ipc", "payloads", "handoffs"} & set(sections):
                    echo = node.spawn(Echo, host=f"b-{pl.label}", cpus=b_cpus)
                    sink = node.spawn(Sink, host=f"b-{pl.label}", cpus=b_cpus)
                    l_driver = node.spawn(Driver, host=f"l-{pl.label}", cpus=both)
                    l_echo = node.spawn(Echo, host=f"l-{pl.label}", cpus=both)
                    l_sink = node.spawn(Sink, host=f"l-{pl.label}", cpus=both)
                    refs += [echo, sink, l_driver, l_echo, l_sink]
                if node_b is not None:
                    x_echo = node.spawn(Echo, node="b", host=f"b-{pl.label}", cpus=b_cpus)
                    x_sink = node.spawn(Sink, node="b", host=f"b-{pl.label}", cpus=b_cpus)
                    refs += [x_echo, x_sink]
                if "bulk" in sections and node_b is not None:
                    streamer = node.spawn(Driver, host=f"s-{pl.label}", cpus=a_cpus)
                    neighbour = node.spawn(Driver, host=f"s-{pl.label}", cpus=a_cpus)
                    x_bulk = node.spawn(Sink, node="b", host=f"s-{pl.label}", cpus=b_cpus)
                    refs += [streamer, neighbour, x_bulk]
                bar.step(f"{pl.label}: hosts up")
                payload_out: dict[str, list[Any]] = {}
                bulk_out: dict[str, list[Any]] = {}
                handoff_out: dict[str, list[Any]] = {}
                calls: dict[str, list[dict[str, float]]] = {
                    k: [] for s in sections if s in CALL_KINDS for k in CALL_KINDS[s]
                }
                casts: dict[str, list[dict[str, Any]]] = {
                    k: [] for s in sections if s in CAST_KINDS for k in CAST_KINDS[s]
                }
                n, w, cn, mx = cfg["call_n"], cfg["warmup"], cfg["cast_n"], cfg["max_s"]
                big = mx + 30.0

                def actor_calls(drv: Any, target: Any) -> dict[str, float]:
                    return summarize(drv.call(("calls", target, n, w, mx, PAYLOAD), timeout=big))

                def pinned_main_calls(target: Any) -> dict[str, float]:
                    pin_process(pl.a)
                    try:
                        return summarize(main_calls(target, n, w, mx))
                    finally:
                        pin_process(None)

                def actor_casts(drv: Any, target: Any) -> dict[str, Any]:
                    t0, count, t_end, sent = drv.call(("casts", target, cn, 0, mx, PAYLOAD), timeout=big)
                    return _rate(t0, count, t_end, sent)

                for rep in range(cfg["reps"]):
                    tag = f"{pl.label} rep {rep + 1}/{cfg['reps']}"
                    ep = f"ipc://{tmp}/raw-{pl.label}-{rep}.sock"
                    steps: list[tuple[str, Any]] = []
                    if "ipc" in sections:
                        steps += [
                            ("call raw", lambda: calls["raw"].append(summarize(raw_call(ep, pl, n, w, mx)))),
                            ("call actor", lambda: calls["actor"].append(actor_calls(driver, echo))),
                            ("call main", lambda: calls["main"].append(pinned_main_calls(echo))),
                            ("call local", lambda: calls["local"].append(actor_calls(l_driver, l_echo))),
                            ("cast raw", lambda: casts["raw"].append(raw_cast(ep, pl, cn, mx))),
                            ("cast actor", lambda: casts["actor"].append(actor_casts(driver, sink))),
                            ("cast local", lambda: casts["local"].append(actor_casts(l_driver, l_sink))),
                        ]
                    if node_b is not None and "tcp" in sections:
                        tcp = _raw.TCP_ANY
                        steps += [
                            (
                                "call tcp_raw",
                                lambda: calls["tcp_raw"].append(summarize(raw_call(tcp, pl, n, w, mx, curve))),
                            ),
                            ("call tcp_actor", lambda: calls["tcp_actor"].append(actor_calls(driver, x_echo))),
                            ("call tcp_main", lambda: calls["tcp_main"].append(pinned_main_calls(x_echo))),
                            ("cast tcp_raw", lambda: casts["tcp_raw"].append(raw_cast(tcp, pl, cn, mx, curve))),
                            ("cast tcp_actor", lambda: casts["tcp_actor"].append(actor_casts(driver, x_sink))),
                        ]
                    if "payloads" in sections:
                        targets = {"ipc": (echo, sink)}
                        if node_b is not None:
                            targets["tcp"] = (x_echo, x_sink)
                        steps += payload_steps(cfg, pl, tmp, curve, sections, driver, targets, payload_out, summarize)
                    if "handoffs" in sections:
                        steps += handoff_steps(
                            cfg, pl, f"ipc://{tmp}/raw-h-{pl.label}-{rep}.sock", driver, echo, sink, handoff_out
                        )
                    if "bulk" in sections and node_b is not None:
                        steps.append(
                            ("bulk", bulk_step(cfg, driver, streamer, x_echo, x_bulk, bulk_out, summarize, neighbour))
                        )
                    for what, step in steps:
                        step()
                        bar.step(f"{tag}: {what}")
                for ref in refs:
                    node.stop(ref, timeout=10.0)
                results[pl.label] = _aggregate(pl, calls, casts, median)
                if payload_out:
                    results[pl.label]["payloads"] = _aggregate_payloads(payload_out, median)
                if handoff_out:
                    results[pl.label]["handoffs"] = _aggregate_handoffs(handoff_out, median)
                if bulk_out:
                    results[pl.label]["bulk"] = {
                        k: {
                            "p50_us": round(median(r["p50_us"] for r in v), 2),
                            "p99_us": round(median(r["p99_us"] for r in v), 2),
                            "reps": v,
                        }
                        for k, v in bulk_out.items()
                    }
    finally:
        if node_b is not None:
            node_b.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "bench": "messaging",
        "mode": "quick" if args.quick else "full",
        "config": cfg,
        "sections": list(sections),
        "payload": {"type": "str", "bytes": len(PAYLOAD.encode())},
        "targets": TARGETS,
        "environment": env,
        "placements": results,
    }


def _aggregate(
    pl: Any, calls: dict[str, list[dict[str, float]]], casts: dict[str, list[dict[str, Any]]], median: Any
) -> dict[str, Any]:
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
    ratios: dict[str, Any] = {}
    for prefix, key in (("", "raw"), ("tcp_", "tcp_raw")):
        if key not in call_out:
            continue
        raw50 = call_out[key]["p50_us"]
        raw_rate = cast_out[key]["msgs_per_s"]
        for kind in (k for k in call_out if k != key and k.startswith(prefix) and (prefix or "tcp" not in k)):
            ratios[f"call_{kind}_p50"] = round(call_out[kind]["p50_us"] / raw50, 2)
        ratios[f"call_{prefix}actor_p99"] = round(call_out[f"{prefix}actor"]["p99_us"] / call_out[key]["p99_us"], 2)
        for kind in (k for k in cast_out if k != key and k.startswith(prefix) and (prefix or "tcp" not in k)):
            ratios[f"cast_{kind}_rate"] = round(cast_out[kind]["msgs_per_s"] / raw_rate, 3)
        ratios[f"{prefix}call_target_met"] = ratios[f"call_{prefix}actor_p50"] <= TARGETS["call_p50_ratio_max"]
        ratios[f"{prefix}cast_target_met"] = ratios[f"cast_{prefix}actor_rate"] >= _cast_floor(prefix[:-1])
        if f"call_{prefix}main_p50" in ratios and prefix:
            ratios[f"{prefix}main_call_target_met"] = (
                ratios[f"call_{prefix}main_p50"] <= TARGETS["tcp_main_call_p50_ratio_max"]
            )
    cpus = {"a": sorted(pl.a) if pl.a else None, "b": sorted(pl.b) if pl.b else None}
    return {"cpus": cpus, "call": call_out, "cast": cast_out, "ratios": ratios}


def _aggregate_payloads(out: dict[str, list[Any]], median: Any) -> dict[str, Any]:
    """Medians per payload row, and each actor row's ratio to the raw row of its size."""
    from _payloads import NO_TARGET, payloads

    sizes = {name: size for name, (_, size) in payloads(PAYLOAD).items()}
    rows: dict[str, Any] = {}
    for key, reps in out.items():
        if " call " in key:
            rows[key] = {
                "p50_us": round(median(r["p50_us"] for r in reps), 2),
                "p99_us": round(median(r["p99_us"] for r in reps), 2),
            }
        else:
            rows[key] = {"msgs_per_s": round(median(r["msgs_per_s"] for r in reps), 1)}
    for key, row in rows.items():
        transport, op, name = key.split(" ", 2)
        if name.startswith("raw "):
            continue
        raw = rows.get(f"{transport} {op} raw {sizes[name]}")
        if raw is None:
            continue
        if op == "call":
            row["ratio"] = round(row["p50_us"] / raw["p50_us"], 2)
            if name not in NO_TARGET:
                row["target_met"] = row["ratio"] <= TARGETS["call_p50_ratio_max"]
        else:
            row["ratio"] = round(row["msgs_per_s"] / raw["msgs_per_s"], 3)
            if name not in NO_TARGET:
                row["target_met"] = row["ratio"] >= _cast_floor(transport, sizes[name])
        row["mb_per_s"] = round((row.get("msgs_per_s") or 1e6 / row["p50_us"]) * sizes[name] / 1e6, 2)
    return {"rows": rows, "reps": out}


def _report_payloads(data: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "payloads, actor to actor (ipc: hosts of one node; tcp: two nodes), each against the raw loop "
        "of the same size: call p50/p99 us, cast messages/s",
    ]
    head = f"{'placement':<10} {'row':<24} {'call p50 / p99':>18} {'x raw':>7} {'cast msgs/s':>13} {'x raw':>7} {'MB/s':>8}"
    lines += [head, "-" * len(head)]
    for label, r in data["placements"].items():
        rows = r.get("payloads", {}).get("rows", {})
        names = sorted({k.split(" ", 2)[2] for k in rows} | set(), key=lambda x: (x.startswith("raw"), x))
        for transport in ("ipc", "tcp"):
            for name in names:
                c, k = rows.get(f"{transport} call {name}"), rows.get(f"{transport} cast {name}")
                if c is None and k is None:
                    continue
                call = f"{c['p50_us']:8.1f} /{c['p99_us']:8.1f}" if c else ""
                cast = f"{k['msgs_per_s']:>13,.0f}" if k else ""
                cr = f"x{c['ratio']:.2f}" if c and "ratio" in c else ""
                kr = f"x{k['ratio']:.3f}" if k and "ratio" in k else ""
                mbs = f"{k['mb_per_s']:.1f}" if k and "mb_per_s" in k else ""
                lines.append(f"{label:<10} {transport + ' ' + name:<24} {call:>18} {cr:>7} {cast:>13} {kr:>7} {mbs:>8}")
    return lines


def _report_bulk(data: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "small call across nodes (actor to actor, 100 B), alone and while another actor streams 1 MB "
        "casts between the same two nodes: p50 / p99 us",
    ]
    for label, r in data["placements"].items():
        b = r.get("bulk")
        if not b:
            continue
        q, d = b["quiet"], b["during bulk"]
        sent = sum(x.get("bulk_mb_sent", 0) for x in d["reps"])
        lines.append(
            f"{label:<10} alone {q['p50_us']:8.1f} /{q['p99_us']:9.1f}   during bulk {d['p50_us']:8.1f} /"
            f"{d['p99_us']:9.1f}   ({sent} x 1 MB streamed)"
        )
        s = b.get("during bulk, same host")
        if s:
            calls = sum(x["n"] for x in s["reps"])
            lines.append(
                f"{'':<10} from the streamer's own host process, during bulk {s['p50_us']:8.1f} /"
                f"{s['p99_us']:9.1f}   ({calls} calls in {len(s['reps'])} x {data['config']['max_s']} s)"
            )
    return lines


_TITLES = {"ipc": "processes of one node (ipc)", "tcp": "two nodes, separate OS processes (tcp 127.0.0.1, CurveZMQ)"}


def report(data: dict[str, Any]) -> str:
    lines = [
        f"messaging benchmark ({data['mode']}, payload {data['payload']['bytes']} B str, "
        f"median of {data['config']['reps']} reps; {data['environment'].get('cpu_model', '?')}, "
        f"{len(data['environment']['cpus_allowed'])} CPUs)"
    ]
    for section in [s for s in data.get("sections", ["ipc"]) if s in CALL_KINDS]:
        raw_kind = CALL_KINDS[section][0]
        lines += ["", f"{_TITLES[section]}: call round trip, p50 / p99 in us (ratio = p50 / {raw_kind} p50)"]
        head = f"{'placement':<10} " + " ".join(f"{k:>22}" for k in CALL_KINDS[section])
        lines += [head, "-" * len(head)]
        for label, r in data["placements"].items():
            cells = []
            raw50 = r["call"][raw_kind]["p50_us"]
            for k in CALL_KINDS[section]:
                c = r["call"][k]
                ratio = "" if k == raw_kind else f" x{c['p50_us'] / raw50:.2f}"
                cells.append(f"{c['p50_us']:7.1f} /{c['p99_us']:7.1f}{ratio:>6}")
            lines.append(f"{label:<10} " + " ".join(f"{c:>22}" for c in cells))
        lines += ["", f"{_TITLES[section]}: one-way cast throughput, messages/s (ratio = / {raw_kind})"]
        head = f"{'placement':<10} " + " ".join(f"{k:>20}" for k in CAST_KINDS[section])
        lines += [head, "-" * len(head)]
        for label, r in data["placements"].items():
            raw = r["cast"][raw_kind]["msgs_per_s"]
            cells = []
            for k in CAST_KINDS[section]:
                v = r["cast"][k]["msgs_per_s"]
                ratio = "" if k == raw_kind else f" x{v / raw:.3f}"
                cells.append(f"{v:>11,.0f}{ratio:>8}")
            lines.append(f"{label:<10} " + " ".join(f"{c:>20}" for c in cells))
    if "payloads" in data.get("sections", []):
        lines += _report_payloads(data)
    if "bulk" in data.get("sections", []):
        lines += _report_bulk(data)
    if "handoffs" in data.get("sections", []):
        lines += _report_handoffs(data)
    env = data["environment"]
    if env.get("loadavg_1m", 0) > len(env["cpus_allowed"]) / 2:
        lines += [
            "",
            f"WARNING: load average {env['loadavg_1m']} at start on {len(env['cpus_allowed'])} CPUs: "
            "other work shares these cores, latencies are inflated and noisy",
        ]
    lines += [
        "",
        f"targets: actor call p50 <= {TARGETS['call_p50_ratio_max']}x raw, "
        f"actor cast >= {TARGETS['cast_rate_ratio_min']}x raw in a node, "
        f">= {TARGETS['tcp_cast_rate_ratio_min']}x across nodes, host program -> remote call "
        f"<= {TARGETS['tcp_main_call_p50_ratio_max']}x (each against its own transport's raw row)",
    ]
    for label, r in data["placements"].items():
        q = r["ratios"]
        for prefix in ("", "tcp_"):
            if f"{prefix}call_target_met" in q:
                lines.append(
                    f"  {label:<10} {prefix or 'ipc_'}call x{q[f'call_{prefix}actor_p50']:.2f} "
                    f"{'met' if q[f'{prefix}call_target_met'] else 'MISSED'}   "
                    f"{prefix or 'ipc_'}cast x{q[f'cast_{prefix}actor_rate']:.3f} "
                    f"{'met' if q[f'{prefix}cast_target_met'] else 'MISSED'}"
                    + (
                        f"   tcp_main_call x{q['call_tcp_main_p50']:.2f} "
                        f"{'met' if q['tcp_main_call_target_met'] else 'MISSED'}"
                        if prefix and "tcp_main_call_target_met" in q
                        else ""
                    )
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--node-b" in argv:
        return _node_b_main(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer messages and reps (~30 s)")
    ap.add_argument("--placement", action="append", help="only this placement (repeatable)")
    ap.add_argument(
        "--section",
        action="append",
        choices=SECTIONS,
        help="only these rows (repeatable): ipc (one node), tcp (two nodes), payloads, bulk, handoffs",
    )
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
        path = write_json("messaging", data)
        print(f"\nwrote {os.path.relpath(path, ROOT)}")
        groups = {label: {k: c["p50_us"] for k, c in r["call"].items()} for label, r in data["placements"].items()}
        png = plot_bars("messaging", "call p50 (us)", groups, "us")
        if png:
            print(f"wrote {os.path.relpath(png, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
