"""Actors the couch_jobs actor-layer tests place in host processes.

Each one attaches its process to couch_jobs in ``init`` (``process.use(self)``,
which opens the database named in the node's config) and reports what it did
as messages to a `Collector` living in the test process.
"""

from __future__ import annotations

import os
import queue
import time
from typing import Any

import actors.couch_jobs as couch_jobs
from actors import ActorRef, GenServer
from actors.couch_jobs import process
from tests.couch_jobs.finished_log import finish_logged
from tests.polling import take_first


class Collector(GenServer):
    """Lives in the test process; pushes every info message into a queue."""

    def init(self, q: "queue.Queue[Any]") -> None:
        self.q = q

    def handle_info(self, message: Any) -> None:
        self.q.put(message)


def collected(q: "queue.Queue[Any]", tag: str, timeout: float, who: set[int] | None = None) -> tuple[Any, ...]:
    """The next message a `Collector` queued tagged ``tag`` (from a worker in
    ``who``, when given), others skipped; fails after ``timeout`` s."""
    message = take_first(q, lambda m: m[0] == tag and (who is None or m[1] in who), timeout)
    if message is None:
        raise AssertionError(f"no {tag!r} message within {timeout}s")
    return message


class Worker(GenServer):
    """Accepts and finishes jobs of one type, logging each finish in the same transaction."""

    def init(self, job_type: Any, worker_no: int) -> None:
        self.jobs = process.use(self)
        self.type = job_type
        self.no = worker_no

    def handle_call(self, request: Any, from_: Any) -> Any:
        op = request[0]
        if op == "pid":
            return os.getpid()
        if op == "accept_once":
            # How long a blocked accept takes to see an add made elsewhere.
            _, timeout = request
            t0 = time.monotonic()
            job, data = self.jobs.accept(self.type, timeout=timeout)
            elapsed = time.monotonic() - t0
            self.jobs.finish(None, job)
            return job.id, elapsed
        if op == "subscribe":
            _, job_id = request
            return self.jobs.subscribe(self.type, job_id)
        if op == "wait":
            _, subs, state, timeout = request
            return self.jobs.wait(subs, state, timeout)
        if op == "unsubscribe":
            self.jobs.unsubscribe(request[1])
            return "ok"
        raise ValueError(f"unknown request {request!r}")

    def handle_cast(self, request: Any) -> None:
        op = request[0]
        if op == "run":
            _, collector, max_jobs, idle_timeout, *gate = request
            self.run(collector, max_jobs, idle_timeout, gate[0] if gate else None)
        elif op == "accept_async":
            _, collector, timeout = request
            collector.send(("accepting", self.no))
            t0 = time.monotonic()
            job, _ = self.jobs.accept(self.type, timeout=timeout)
            collector.send(("accepted", self.no, job.id, time.monotonic() - t0))
            self.jobs.finish(None, job)
        elif op == "run_resilient":
            _, collector, max_jobs, idle_timeout, max_errors = request
            self.run_resilient(collector, max_jobs, idle_timeout, max_errors)
        elif op == "accept_and_hold":
            # Take a job and never update it: the activity monitor must take it back.
            _, collector = request
            job, _ = self.jobs.accept(self.type, timeout=30)
            collector.send(("held", self.no, job, os.getpid()))
        else:
            raise ValueError(f"unknown cast {request!r}")

    def run(self, collector: ActorRef, max_jobs: int, idle_timeout: float, gate: ActorRef | None = None) -> None:
        """Accept and finish up to ``max_jobs``; with a ``gate`` (`tests.kernel.probes.Gate`),
        hold the first job accepted until the gate opens, so a test can see every
        worker holding one job at the same time."""
        done = 0
        collector.send(("running", self.no))
        for _ in range(max_jobs):
            try:
                job, data = self.jobs.accept(self.type, timeout=idle_timeout)
            except couch_jobs.NotFound:
                break
            if gate is not None and done == 0:
                collector.send(("holding", self.no))
                gate.call("wait", timeout=60.0)
            finish_logged(self.jobs, job, data, self.no)
            done += 1
            collector.send(("finished", self.no, job.id))
        collector.send(("done", self.no, done))

    def run_resilient(self, collector: ActorRef, max_jobs: int, idle_timeout: float, max_errors: int) -> None:
        """Like `run`, but a lost lock (`Halt`) or an absent store is reported, not fatal."""
        done = errors = 0
        collector.send(("running", self.no))
        while done < max_jobs and errors <= max_errors:
            try:
                job, data = self.jobs.accept(self.type, timeout=idle_timeout)
            except couch_jobs.NotFound:
                break
            except couch_jobs.StoreUnavailable as exc:
                errors += 1
                collector.send(("store_error", self.no, str(exc)))
                continue
            try:
                finish_logged(self.jobs, job, data, self.no)
            except couch_jobs.Halt:
                collector.send(("halted", self.no, job.id))
                continue
            except couch_jobs.StoreUnavailable as exc:
                errors += 1
                collector.send(("store_error", self.no, str(exc)))
                continue
            done += 1
            collector.send(("finished", self.no, job.id))
        collector.send(("done", self.no, done))
