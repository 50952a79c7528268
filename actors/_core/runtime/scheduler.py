"""The scheduler of one process: actors run as objects on a few worker threads.

An actor is not a thread.  It is a `Runnable` with a mailbox; when mail
comes to an idle one it goes on the run queue, and a worker takes it,
handles a bounded batch of its entries (``throughput``, as Akka's dispatcher
throughput and the BEAM's reductions: an actor with a million messages
waiting does not starve the rest), and puts it back at the tail if more is
waiting.  One worker runs an actor at a time, so an actor's callbacks never
run concurrently.

Python code may block, and an actor's handler is allowed to.  Two ways,
both kept from stalling the process:

- **In the kernel** (a call waiting for its reply, a spawn waiting for the
  child's ``init``): the worker says so (`Scheduler.blocking`), stops
  counting as one that runs the queue, and when work is waiting a spare
  worker is woken or started in its place -- as Java's
  ``ForkJoinPool.managedBlock`` and Go's hand-off of a P on a syscall.
- **Outside it** (``time.sleep``, file or socket IO, a C extension, a long
  loop): a monitor thread (Go's ``sysmon``) sees a worker that has been in
  one turn for longer than ``stuck_after`` and, when work is waiting,
  starts another in its place.  A turn longer than ``warn_after`` is logged
  once per actor class with the worker's stack, and counted.

Workers beyond the target (the CPUs this process may use, plus spares)
retire after ``idle_retire`` seconds without work, so the pool shrinks back
once the blocking is over.  At most ``max_workers`` exist at once.

The scheduler knows nothing of cells: a `Runnable` is anything with a
``turn()`` to run on a worker.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from actors._core.base.config import Config, ConfigError
from actors._core.base.stats import Stats
from actors._core.runtime.context import thread_state

__all__ = [
    "IDLE_RETIRE",
    "MAX_WORKERS",
    "Runnable",
    "STUCK_AFTER",
    "SPARE_WORKERS",
    "Scheduler",
    "THROUGHPUT",
    "WARN_AFTER",
    "Worker",
    "default_workers",
    "scheduler_from_config",
]

log = logging.getLogger("actors.scheduler")

#: Entries an actor handles in one turn before the others get theirs.
THROUGHPUT = 64
#: Workers kept beyond one per CPU, so a short block does not wait for a new thread.
SPARE_WORKERS = 2
#: Seconds a worker may spend in one turn before the monitor takes it for
#: blocked outside the kernel and brings in another.  A Python callback
#: that computes for 20 ms is rare; one that sleeps or reads a socket is
#: not.  Lower costs more thread switches under the GIL; higher leaves
#: other actors waiting that much longer behind a blocked one.
STUCK_AFTER = 0.02
#: Seconds in one turn after which the turn is logged (once per actor class)
#: and counted: a handler this slow holds its actor's mail for as long.
WARN_AFTER = 0.2
#: Seconds a worker beyond the target waits for work before it ends.
IDLE_RETIRE = 2.0
#: The most workers one process runs at once (blocked ones included).
MAX_WORKERS = 1024


def default_workers() -> int:
    """Workers that run the queue: one per CPU this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class Runnable(Protocol):
    """What a worker runs: one turn of an actor (a batch of its mail)."""

    def turn(self) -> None:
        """Handle some of the mail; put itself back on the queue if more waits."""


class Worker:
    """One worker thread's record, read by the monitor without a lock (the
    GIL makes each field's write atomic; a stale read only delays a
    decision by one tick)."""

    __slots__ = ("thread", "started", "running", "blocked", "stuck", "warned")

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        #: ``time.monotonic()`` when the turn in hand began (0.0: between turns).
        self.started = 0.0
        #: What it runs now (for the warning's name).
        self.running: Any = None
        #: Blocked in the kernel (`Scheduler.blocking`): not running the queue.
        self.blocked = 0
        #: Taken for blocked outside the kernel by the monitor, this turn.
        self.stuck = False
        #: This turn was logged as slow already.
        self.warned = False


class Scheduler:
    """The run queue and the workers of one process (see the module's docstring)."""

    def __init__(
        self,
        workers: int | None = None,
        *,
        spares: int = SPARE_WORKERS,
        max_workers: int = MAX_WORKERS,
        throughput: int = THROUGHPUT,
        stuck_after: float = STUCK_AFTER,
        warn_after: float = WARN_AFTER,
        idle_retire: float = IDLE_RETIRE,
        stats: Stats | None = None,
        name: str = "actors",
        on_worker_exit: Callable[[], None] | None = None,
    ) -> None:
        if workers is None:
            workers = default_workers()
        if workers < 1:
            raise ValueError(f"a scheduler needs at least one worker, got {workers!r}")
        if max_workers < workers + spares:
            raise ValueError(f"max_workers ({max_workers}) is below workers + spares ({workers + spares})")
        if throughput < 1:
            raise ValueError(f"throughput must be at least 1, got {throughput!r}")
        #: Workers that run the queue while none is blocked.
        self.target = workers + spares
        self.max_workers = max_workers
        self.throughput = throughput
        self.stuck_after = stuck_after
        self.warn_after = warn_after
        self.idle_retire = idle_retire
        self.stats = stats
        self.name = name
        self._on_worker_exit = on_worker_exit
        self._queue: deque[Runnable] = deque()
        self.lock = threading.Lock()
        self._work = threading.Condition(self.lock)
        self._workers: list[Worker] = []
        #: Workers waiting for work.
        self._idle = 0
        #: Workers counted against the target: neither blocked nor stuck.
        self._active = 0
        self._monitor: threading.Thread | None = None
        self._monitor_wake = threading.Event()
        self._closed = False
        self._numbers = 0
        self._warned_classes: set[str] = set()
        #: Turns longer than ``warn_after`` (also in ``actors.scheduler.slow_turns``).
        self.slow_turns = 0
        #: Workers started in place of a blocked or stuck one.
        self.handoffs = 0

    # -- the queue ---------------------------------------------------------------

    def submit(self, runnable: Runnable) -> None:
        """Put ``runnable`` at the tail of the run queue (any thread)."""
        with self.lock:
            self._queue.append(runnable)
            if self._idle:
                self._work.notify()
            elif self._active < self.target and not self._closed:
                self._start_worker()
            elif self._monitor is not None:
                self._monitor_wake.set()

    def queued(self) -> int:
        """Runnables waiting for a worker."""
        return len(self._queue)

    def workers(self) -> dict[str, int]:
        """How many workers exist, and in which state (for status pages and tests)."""
        with self.lock:
            all_ = self._workers
            return {
                "workers": len(all_),
                "idle": self._idle,
                "blocked": sum(1 for w in all_ if w.blocked),
                "stuck": sum(1 for w in all_ if w.stuck),
                "target": self.target,
                "queued": len(self._queue),
            }

    # -- blocking -----------------------------------------------------------------

    def block(self) -> Worker | None:
        """The calling thread is about to wait in the kernel.  On a worker:
        it stops counting against the target, and waiting work gets a
        spare.  Returns what `unblock` takes (None off the pool)."""
        worker = thread_state.worker
        if worker is None:
            return None
        with self.lock:
            worker.blocked += 1
            if worker.blocked == 1 and not worker.stuck:
                self._active -= 1
            if self._queue and not self._idle and self._active < self.target and not self._closed:
                self.handoffs += 1
                self._start_worker()
            elif self._queue and self._idle:
                self._work.notify()
        return worker

    @contextmanager
    def blocking(self) -> Iterator[None]:
        """`block` and `unblock` around a wait in the kernel."""
        worker = self.block()
        try:
            yield
        finally:
            self.unblock(worker)

    def unblock(self, worker: Worker | None) -> None:
        """The wait `block` announced is over: the worker finishes its turn."""
        if worker is None:
            return
        with self.lock:
            worker.blocked -= 1
            if worker.blocked == 0 and not worker.stuck:
                self._active += 1

    # -- workers ------------------------------------------------------------------

    def _start_worker(self) -> None:
        """A new worker (under ``lock``); at most ``max_workers``."""
        if len(self._workers) >= self.max_workers:
            return
        worker = Worker()
        self._numbers += 1
        thread = threading.Thread(
            target=self._run, args=(worker,), name=f"{self.name}-worker-{self._numbers}", daemon=True
        )
        worker.thread = thread
        self._workers.append(worker)
        self._active += 1
        thread.start()
        if self._monitor is None:
            self._monitor = threading.Thread(target=self._watch, name=f"{self.name}-sysmon", daemon=True)
            self._monitor.start()

    def _run(self, worker: Worker) -> None:
        state = thread_state
        state.worker = worker
        queue = self._queue
        work = self._work
        lock = self.lock
        monotonic = time.monotonic
        try:
            while True:
                with lock:
                    while not queue:
                        if self._closed:
                            return
                        self._idle += 1
                        got = work.wait(self.idle_retire)
                        self._idle -= 1
                        if not got and not queue and len(self._workers) > self.target:
                            return  # the pool shrinks back after the blocking is over
                    runnable = queue.popleft()
                    if queue and self._idle:
                        work.notify()  # more waiting: wake another
                worker.running = runnable
                worker.started = monotonic()
                try:
                    runnable.turn()
                except BaseException:  # noqa: BLE001 - a turn reports its own failures; this is a kernel bug
                    log.exception("scheduler %s: a turn failed", self.name)
                finally:
                    worker.started = 0.0
                    worker.running = None
                    if worker.stuck or worker.warned:
                        self._turn_over(worker)
        finally:
            with lock:
                self._workers.remove(worker)
                if not worker.blocked and not worker.stuck:
                    self._active -= 1
            state.worker = None
            if self._on_worker_exit is not None:
                try:
                    self._on_worker_exit()
                except Exception:  # noqa: BLE001 - a worker's end must not raise
                    log.debug("scheduler %s: cleanup of an ending worker failed", self.name, exc_info=True)

    def _turn_over(self, worker: Worker) -> None:
        """A turn the monitor took for stuck has ended: the worker counts again."""
        with self.lock:
            if worker.stuck:
                worker.stuck = False
                if not worker.blocked:
                    self._active += 1
            worker.warned = False

    # -- the monitor ------------------------------------------------------------------

    def _watch(self) -> None:
        """Go's sysmon: every tick, take workers that sit in one turn too long
        for blocked, bring in others for the waiting work, and warn of slow turns."""
        tick = max(0.001, self.stuck_after / 4)
        idle_tick = max(tick, 0.05)
        while not self._closed:
            busy = self._check(time.monotonic())
            self._monitor_wake.wait(tick if busy else idle_tick)
            self._monitor_wake.clear()

    def _check(self, now: float) -> bool:
        """One look at the workers; whether any is in a turn (tick faster then)."""
        busy = False
        slow: list[tuple[Worker, float]] = []
        with self.lock:
            for worker in self._workers:
                started = worker.started
                if not started:
                    continue
                busy = True
                took = now - started
                if took >= self.stuck_after and not worker.stuck:
                    worker.stuck = True
                    if not worker.blocked:
                        self._active -= 1
                if took >= self.warn_after and not worker.warned:
                    worker.warned = True
                    slow.append((worker, took))
            waiting = len(self._queue)
            if waiting and not self._idle and not self._closed:
                # As many as are waiting, up to the target's worth again and
                # at least as many as are stuck: a burst of sleeping handlers
                # gets its workers in a few ticks, not one at a time.
                stuck = sum(1 for w in self._workers if w.stuck or w.blocked)
                want = min(waiting, max(self.target - self._active, stuck))
                for _ in range(want):
                    self.handoffs += 1
                    self._start_worker()
        for worker, took in slow:
            self._warn(worker, took)
        return busy

    def _warn(self, worker: Worker, took: float) -> None:
        self.slow_turns += 1
        if self.stats is not None:
            self.stats.increment("actors.scheduler.slow_turns")
        what = worker.running
        label = getattr(what, "label", None)
        kind = label() if callable(label) else type(what).__name__
        if kind in self._warned_classes:
            return
        self._warned_classes.add(kind)
        thread = worker.thread
        frame = sys._current_frames().get(thread.ident) if thread is not None and thread.ident else None
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(no stack)"
        log.warning(
            "a turn of %s has run for %.0f ms (over %.0f ms): its actor's mail waits meanwhile; "
            "an actor that blocks most of the time belongs on a thread of its own (thread='own'); "
            "logged once per actor class.  Its stack:\n%s",
            kind,
            took * 1000.0,
            self.warn_after * 1000.0,
            stack.rstrip(),
            extra={"event": "slow_turn", "actor_class": kind},
        )

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Let every worker end once the queue is empty (at process shutdown)."""
        with self.lock:
            self._closed = True
            self._work.notify_all()
        self._monitor_wake.set()


def scheduler_from_config(config: Config, **kwargs: Any) -> Scheduler:
    """A scheduler set by the ``[scheduler]`` section: ``workers`` (default:
    the CPUs this process may run on), ``spares``, ``max_workers``,
    ``throughput``, ``stuck_after_ms``, ``warn_after_ms``."""
    workers = config.get_integer("scheduler", "workers", 0) or None
    try:
        return Scheduler(
            workers,
            spares=config.get_integer("scheduler", "spares", SPARE_WORKERS),
            max_workers=config.get_integer("scheduler", "max_workers", MAX_WORKERS),
            throughput=config.get_integer("scheduler", "throughput", THROUGHPUT),
            stuck_after=config.get_float("scheduler", "stuck_after_ms", STUCK_AFTER * 1000.0) / 1000.0,
            warn_after=config.get_float("scheduler", "warn_after_ms", WARN_AFTER * 1000.0) / 1000.0,
            **kwargs,
        )
    except ValueError as exc:
        raise ConfigError(f"[scheduler]: {exc}") from None
