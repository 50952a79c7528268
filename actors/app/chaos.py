"""Kill actors in a running supervision tree and account for what happened.

Clients keep calling the tree's workers while a killer ends workers at a
fixed rate — half by ``kill`` inside their host, half by SIGKILL of their host
process when they have one of their own.  The report counts restarts per
supervisor, escalations, and calls that failed versus hung: a call that gets
no answer at all within its timeout is a hang, and there must be none.
"""

from __future__ import annotations

import math
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import supervision as sv
from actors import ActorRef, CallTimeout, Exit, GenServer, Node
from actors.interrupt import deferred, exit_status
from supervision import ChildSpec, SupFlags

__all__ = ["ChaosReport", "ChaosWorker", "build_demo_tree", "run_chaos", "run_chaos_command", "tree_workers"]


class ChaosWorker(GenServer):
    """A worker that answers pings with its tag and pid."""

    def init(self, tag: str) -> None:
        self.tag = tag
        self.calls = 0

    def handle_call(self, request: Any, from_: Any) -> Any:
        self.calls += 1
        return (self.tag, os.getpid(), request)

    def status(self) -> dict[str, Any]:
        return {"calls": self.calls}


class PoolSup(sv.Supervisor):
    """simple_one_for_one pool; its workers are added by `build_demo_tree`."""

    def init(self) -> tuple[Any, Any]:
        return SupFlags("simple_one_for_one", intensity=50, period=5), [
            ChildSpec("pool_worker", (ChaosWorker, ()), host="own")
        ]


def build_demo_tree(node: Node, pool_size: int = 3) -> ActorRef:
    """Three levels, all four strategies, workers spread over host processes."""
    cpus = sorted(os.sched_getaffinity(0))
    pipeline = ChildSpec(
        "pipeline",
        (
            sv._supervisor._StaticSupervisor,
            (
                SupFlags("rest_for_one", intensity=50, period=5),
                [
                    ChildSpec("reader", (ChaosWorker, ("reader",))),
                    ChildSpec("parser", (ChaosWorker, ("parser",)), host="own", cpus={cpus[0]}),
                    ChildSpec("writer", (ChaosWorker, ("writer",)), host="own", cpus={cpus[-1]}),
                ],
            ),
        ),
        type="supervisor",
    )
    pair = ChildSpec(
        "pair",
        (
            sv._supervisor._StaticSupervisor,
            (
                SupFlags("one_for_all", intensity=50, period=5),
                [
                    ChildSpec("left", (ChaosWorker, ("left",)), host="pairhost"),
                    ChildSpec("right", (ChaosWorker, ("right",)), host="pairhost"),
                ],
            ),
        ),
        type="supervisor",
    )
    pool = ChildSpec("pool", (PoolSup, ()), type="supervisor")
    top = sv.start_supervisor(
        node, SupFlags("one_for_one", intensity=100, period=5), [pipeline, pair, pool], name="demo_sup"
    )
    pool_ref = _child(top, "pool")
    for i in range(pool_size):
        sv.start_child(pool_ref, [f"pool{i}"])
    return top


def _child(sup: ActorRef, cid: Any) -> ActorRef:
    for row in sv.which_children(sup):
        if row.id == cid and isinstance(row.child, ActorRef):
            return row.child
    raise LookupError(cid)


def tree_workers(
    sup: ActorRef, timeout: float = 5.0, names: dict[str, str] | None = None
) -> tuple[list[ActorRef], list[ActorRef]]:
    """(workers, supervisors) currently running under ``sup`` (inclusive).

    ``names``, when given, learns each supervisor's child id by its actor
    id, so restart counters (kept by actor id for unregistered supervisors)
    can be reported by the names the tree was built with.
    """
    workers: list[ActorRef] = []
    sups: list[ActorRef] = [sup]
    frontier = [sup]
    while frontier:
        current = frontier.pop()
        try:
            rows = sv.which_children(current, timeout=timeout)
        except (Exit, CallTimeout):
            continue
        for row in rows:
            if not isinstance(row.child, ActorRef):
                continue
            if row.type == "supervisor":
                if names is not None:
                    names[row.child.id] = str(row.id)
                sups.append(row.child)
                frontier.append(row.child)
            else:
                workers.append(row.child)
    return workers, sups


@dataclass
class ChaosReport:
    duration: float = 0.0
    kills: Counter = field(default_factory=Counter)
    calls_ok: int = 0
    calls_failed: int = 0
    calls_hung: int = 0
    restarts: dict[str, int] = field(default_factory=dict)
    escalations: dict[str, int] = field(default_factory=dict)
    seed: int | None = None
    #: the exit status of the signal that cut the run short (130, 143), else None
    interrupted: int | None = None

    @property
    def ok(self) -> bool:
        return self.calls_hung == 0

    def lines(self) -> list[str]:
        out = [
            ("INTERRUPTED, partial report: " if self.interrupted else "")
            + f"chaos ran {self.duration:.1f} s (seed {self.seed}): {sum(self.kills.values())} kills "
            f"({', '.join(f'{k} {v}' for k, v in sorted(self.kills.items())) or 'none'})",
            f"calls: {self.calls_ok} answered, {self.calls_failed} failed with an exit reason, {self.calls_hung} hung",
            "restarts per supervisor: " + (", ".join(f"{k} {v}" for k, v in sorted(self.restarts.items())) or "none"),
            "escalations: " + (", ".join(f"{k} {v}" for k, v in sorted(self.escalations.items())) or "none"),
        ]
        return out


def run_chaos(
    node: Node,
    top: ActorRef,
    rate: float,
    duration: float,
    *,
    clients: int = 3,
    call_timeout: float = 5.0,
    seed: int | None = None,
    on_tick: Callable[[float], None] | None = None,
    on_start: Callable[[], None] | None = None,
) -> ChaosReport:
    """Kill ``rate`` workers a second for ``duration`` seconds while clients call.

    Ctrl-C or SIGTERM (`actors.interrupt`) stops the run early: the report
    covers what happened until then and says it was interrupted.
    Supervisors are named in the report by registered name, else child id.
    """
    if not (math.isfinite(rate) and math.isfinite(duration)) or rate < 0 or duration < 0:
        raise ValueError(f"rate and duration must be finite and >= 0, got {rate} and {duration}")
    rng = random.Random(seed)
    report = ChaosReport(seed=seed)
    names: dict[str, str] = {top.id: top.name or top.id}
    before: dict[str, Any] = {}
    stop = threading.Event()
    lock = threading.Lock()
    start = time.monotonic()
    deadline = start + duration

    def client(index: int) -> None:
        crng = random.Random(rng.random())
        workers: list[ActorRef] = []
        while not stop.is_set():
            if not workers:
                workers = tree_workers(top)[0]
                if not workers:
                    stop.wait(0.05)
                    continue
            ref = crng.choice(workers)
            try:
                ref.call(("ping", index), timeout=call_timeout)
                outcome = "ok"
            except Exit:
                outcome = "failed"
                workers = []
            except CallTimeout:
                outcome = "hung"
                workers = []
            with lock:
                if outcome == "ok":
                    report.calls_ok += 1
                elif outcome == "failed":
                    report.calls_failed += 1
                else:
                    report.calls_hung += 1

    threads = [
        threading.Thread(target=client, args=(i,), name=f"chaos-client-{i}", daemon=True) for i in range(clients)
    ]
    interval = 1.0 / rate if rate > 0 else None
    next_kill = start + (interval or duration)
    try:
        before.update(node.stats()["counters"])
        for t in threads:
            t.start()
        if on_start is not None:
            on_start()  # inside the try: a signal from here on gets the partial report
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            if on_tick is not None:
                on_tick(now - start)
            if interval is not None and now >= next_kill:
                next_kill += interval
                workers = tree_workers(top, names=names)[0]
                if workers:
                    victim = rng.choice(workers)
                    if victim.os_pid != os.getpid() and rng.random() < 0.5:
                        try:
                            os.kill(victim.os_pid, signal.SIGKILL)
                            report.kills["sigkill_host"] += 1
                        except ProcessLookupError:
                            pass
                    else:
                        node.kill(victim)
                        report.kills["kill"] += 1
            stop.wait(min(0.1, max(0.0, min(deadline, next_kill) - time.monotonic())))
    except KeyboardInterrupt as exc:
        report.interrupted = exit_status(exc)
    with deferred():
        stop.set()
        for t in threads:
            if t.ident is not None:
                t.join(call_timeout + 5)
        report.duration = time.monotonic() - start
        tree_workers(top, names=names)
        after = node.stats()["counters"]
    for key, value in after.items():
        delta = value - before.get(key, 0)
        if delta <= 0:
            continue
        for prefix, table in (
            ("supervision.restarts.", report.restarts),
            ("supervision.escalations.", report.escalations),
        ):
            if key.startswith(prefix):
                label = key[len(prefix) :]
                label = names.get(label, label)
                table[label] = table.get(label, 0) + delta
    return report


def run_chaos_command(args: Any) -> int:
    """``otpy chaos --tree demo``: build the tree, run, print the report; 0, 1, 130 or 143."""
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    node = Node()
    try:
        top = build_demo_tree(node)

        def tick(elapsed: float) -> None:
            if sys.stderr.isatty():
                done = min(1.0, elapsed / max(args.duration, 1e-9))
                bar = "#" * int(done * 30)
                print(f"\r[{bar:<30}] {elapsed:5.1f}/{args.duration:g} s", end="", file=sys.stderr, flush=True)

        def started() -> None:
            print(
                f"tree up in {node.rundir}; killing {args.rate:g}/s for {args.duration:g} s; seed {seed} "
                f"(repeat with --seed {seed})",
                flush=True,
            )

        report = run_chaos(
            node, top, args.rate, args.duration, clients=args.clients, seed=seed, on_tick=tick, on_start=started
        )
        with deferred():
            if sys.stderr.isatty():
                print(file=sys.stderr)
            for line in report.lines():
                print(line)
            print("OK: no call hung" if report.ok else "FAIL: calls hung", flush=True)
    finally:
        with deferred():
            node.close()
    if report.interrupted:
        return report.interrupted
    return 0 if report.ok else 1
