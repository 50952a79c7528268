"""A three-level supervision tree with all four strategies, and what it does when children die.

Run ``python examples/supervision_tree.py`` (a few seconds; exits 0).

    top (one_for_one)
    +-- pipeline (rest_for_one): source, transform (own host process, pinned), sink
    +-- pair     (one_for_all, intensity 1 per 5 s): left, right
    +-- pool     (simple_one_for_one, template "job", transient): workers added with start_child

The program crashes children in-process (a call that raises), SIGKILLs the
host process of a pinned child, escalates a crash loop from ``pair`` to
``top``, and prints the supervisors' children before and after each event.
It never sleeps: it waits on monitors (``node.monitor(ref).wait``) and on
calls to the supervisors (``which_children``) in bounded loops.  The
supervisors' structured log records are counted, not printed, so the
restart counts at the end come from what the supervisors reported.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections import Counter
from typing import Any, Callable

if __package__ in (None, ""):  # run as a script from a checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from actors import ActorRef, Exit, GenServer, Node, Stop
from supervision import (
    ChildSpec,
    Supervisor,
    SupFlags,
    count_children,
    start_child,
    which_children,
)

PINNED_CPU = min(os.sched_getaffinity(0))
WAIT_ATTEMPTS = 20_000  # bound on which_children polls per wait (each is a call)


# -- workers --------------------------------------------------------------------------


class Stage(GenServer):
    """A pipeline stage or pair member: answers pings, crashes on request."""

    def init(self, name: str) -> None:
        self.name = name

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "crash":
            raise RuntimeError(f"{self.name} was asked to crash")
        if request == "whoami":
            return {"name": self.name, "pid": os.getpid(), "cpus": sorted(os.sched_getaffinity(0))}
        raise ValueError(f"unknown request {request!r}")


class Job(GenServer):
    """A pool worker: started with the template's args plus start_child's."""

    def init(self, job_id: str) -> None:
        self.job_id = job_id

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "crash":
            raise RuntimeError(f"job {self.job_id} crashed")
        if request == "finish":
            return Stop("normal", reply="finished")  # transient: a normal exit is not restarted
        return self.job_id


# -- supervisors ----------------------------------------------------------------------


class Pipeline(Supervisor):
    def init(self) -> tuple[SupFlags, list[ChildSpec]]:
        return SupFlags(strategy="rest_for_one", intensity=5, period=10), [
            ChildSpec("source", (Stage, ("source",))),
            ChildSpec("transform", (Stage, ("transform",)), host="own", cpus={PINNED_CPU}),
            ChildSpec("sink", (Stage, ("sink",)), shutdown="brutal_kill"),
        ]


class Pair(Supervisor):
    def init(self) -> tuple[SupFlags, list[ChildSpec]]:
        return SupFlags(strategy="one_for_all", intensity=1, period=5), [
            ChildSpec("left", (Stage, ("left",))),
            ChildSpec("right", (Stage, ("right",))),
        ]


class Pool(Supervisor):
    def init(self) -> tuple[SupFlags, list[ChildSpec]]:
        return SupFlags(strategy="simple_one_for_one", intensity=5, period=10), [
            ChildSpec("job", (Job, ()), restart="transient", shutdown=1.0),
        ]


class Top(Supervisor):
    def init(self) -> tuple[SupFlags, list[ChildSpec]]:
        return SupFlags(strategy="one_for_one", intensity=3, period=10), [
            ChildSpec("pipeline", (Pipeline, ()), type="supervisor"),
            ChildSpec("pair", (Pair, ()), type="supervisor"),
            ChildSpec("pool", (Pool, ()), type="supervisor"),
        ]


# -- observing ------------------------------------------------------------------------


class ReportCounter(logging.Handler):
    """Counts the supervisors' structured reports: (supervisor, report, action)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.counts: Counter[tuple[str, str, str]] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        report = getattr(record, "report", None)
        if report is not None:
            self.counts[(record.supervisor, report, record.action)] += 1  # type: ignore[attr-defined]


def children(sup: ActorRef) -> dict[Any, Any]:
    """``which_children`` as {id: ref}; a simple_one_for_one's rows are keyed by position."""
    rows = which_children(sup)
    return {row.id if row.id is not None else i: row.child for i, row in enumerate(rows)}


def show(label: str, sup: ActorRef) -> dict[Any, Any]:
    kids = children(sup)
    print(f"  {label:9} {', '.join(f'{k}={_short(v)}' for k, v in kids.items()) or '(none)'}")
    return kids


def _short(child: Any) -> str:
    return f"{child.id}@{child.os_pid}" if isinstance(child, ActorRef) else repr(child)


def wait_until(what: str, predicate: Callable[[], Any]) -> Any:
    """Call ``predicate`` (which makes calls to a supervisor) until it returns a value."""
    for _ in range(WAIT_ATTEMPTS):
        value = predicate()
        if value:
            return value
    raise RuntimeError(f"gave up waiting for {what}")


def replaced(sup: ActorRef, child_id: Any, old: ActorRef) -> ActorRef:
    """Wait until ``sup`` runs a new child under ``child_id``; return its ref."""

    def check() -> ActorRef | None:
        now = children(sup).get(child_id)
        return now if isinstance(now, ActorRef) and now != old else None

    return wait_until(f"{child_id} to be restarted", check)


def crash(ref: ActorRef) -> Any:
    """Ask ``ref`` to crash; the call fails with the crash as its exit reason."""
    try:
        ref.call("crash")
    except Exit as exc:
        return exc.reason
    raise RuntimeError(f"{ref!r} did not crash")


# -- the scenario ---------------------------------------------------------------------


def main() -> int:
    counter = ReportCounter()
    sup_log = logging.getLogger("supervision")
    sup_log.addHandler(counter)
    sup_log.setLevel(logging.INFO)
    sup_log.propagate = False
    # The kernel logs every crash and host death as an error; this demo
    # provokes them on purpose, so keep stderr for real surprises only.
    logging.getLogger().setLevel(logging.CRITICAL)

    with Node() as node:
        top = node.spawn(Top, name="top")
        assert top is not None
        tree = children(top)
        names = {tree[k].id: k for k in tree}
        names[top.id] = "top"
        pipeline, pair, pool = tree["pipeline"], tree["pair"], tree["pool"]

        print("== 1. the tree as started")
        show("top", top)
        before = show("pipeline", pipeline)
        show("pair", pair)
        jobs = [start_child(pool, (f"job-{i}",)) for i in (1, 2, 3)]
        show("pool", pool)
        print(
            f"  transform runs in host pid {before['transform'].os_pid}, "
            f"pinned to {before['transform'].call('whoami')['cpus']}"
        )

        print("== 2. in-process crash of 'transform' (rest_for_one: transform and sink restart)")
        print(f"  call failed with: {crash(before['transform'])}")
        new_transform = replaced(pipeline, "transform", before["transform"])
        after = show("pipeline", pipeline)
        assert after["source"] == before["source"], "source must be left untouched"
        assert after["sink"] != before["sink"], "sink must be restarted after transform"
        print(
            f"  source kept: {after['source'] == before['source']}; sink restarted: {after['sink'] != before['sink']}"
        )

        print("== 3. SIGKILL of transform's host process")
        old_pid = new_transform.os_pid
        down = node.monitor(new_transform)
        os.kill(old_pid, signal.SIGKILL)
        print(f"  DOWN reason: {down.wait(10)[1]!r}")
        fresh = replaced(pipeline, "transform", new_transform)
        info = fresh.call("whoami")
        show("pipeline", pipeline)
        print(
            f"  transform host pid {old_pid} -> {fresh.os_pid}, cpus {info['cpus']} "
            f"(same placement: {info['cpus'] == [PINNED_CPU]})"
        )

        print("== 4. one_for_all: 'left' crashes, both members restart")
        pair_before = show("pair", pair)
        crash(pair_before["left"])
        replaced(pair, "right", pair_before["right"])
        pair_after = show("pair", pair)
        print(
            f"  left restarted: {pair_after['left'] != pair_before['left']}; "
            f"right restarted: {pair_after['right'] != pair_before['right']}"
        )

        print("== 5. escalation: a second crash within 5 s exceeds pair's intensity (1)")
        pair_down = node.monitor(pair)
        crash(pair_after["right"])
        print(f"  pair supervisor exited: {pair_down.wait(10)[1]!r}")
        new_pair = replaced(top, "pair", pair)
        names[new_pair.id] = "pair"
        show("top", top)
        show("pair", new_pair)
        print(f"  top restarted pair: {pair.id} -> {new_pair.id}, with its init children")

        print("== 6. simple_one_for_one pool (transient jobs)")
        print(f"  crash of {jobs[0].call('id')}: {crash(jobs[0])}")
        wait_until(
            "the crashed job to be replaced",
            lambda: len(children(pool)) == 3 and jobs[0] not in children(pool).values(),
        )
        print(f"  {jobs[1].call('id')} finishes normally: {jobs[1].call('finish')}")
        wait_until("the finished job to be dropped", lambda: len(children(pool)) == 2)
        show("pool", pool)
        print(f"  count_children(pool) = {count_children(pool)}")

        print("== 7. restarts reported by each supervisor")
        for (sup_label, report, action), n in sorted(counter.counts.items()):
            print(f"  {names.get(sup_label, sup_label):9} {report:18} {action:14} x{n}")
        restarts = sum(n for (_s, r, a), n in counter.counts.items() if r == "child_terminated" and a == "restarting")
        print(f"  total restart decisions: {restarts}")
    print("done: node closed, nothing left running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
