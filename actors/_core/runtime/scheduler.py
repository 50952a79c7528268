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
import queue
import sys
import threading
import time
import traceback
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
#: The share of one CPU this process must have used since the monitor's last
#: look for it to add no workers: it is computing, so a worker that seems
#: stuck is waiting for the GIL, which another thread would only wait for too.
GIL_BUSY = 0.8
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

    __slots__ = ("thread", "started", "running", "blocked", "stuck", "warned", "cpu_clock", "cpu_mark", "idle")

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
        #: Waiting for work on the run queue (written by its own thread only).
        self.idle = False
        #: The thread's CPU-time clock (None where the platform has none), and
        #: its reading at the monitor's last look: a stuck worker whose CPU
        #: time stands still is waiting (sleep, IO), one whose time runs is computing.
        self.cpu_clock: int | None = None
        self.cpu_mark = 0.0


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
        # The run queue: a C queue, so that a wake-up costs one put, and an idle
        # worker is handed its runnable without a Python condition.  Workers
        # start with the first runnable; None tells one to end.
        self._queue: queue.SimpleQueue[Runnable | None] = queue.SimpleQueue()
        self._started = False
        #: Guards the workers' table and their counts (not the queue).
        self.lock = threading.Lock()
        self._workers: list[Worker] = []
        #: Workers counted against the target: neither blocked nor stuck.
        self._active = 0
        self._monitor: threading.Thread | None = None
        self._monitor_wake = threading.Event()
        self._closed = False
        self._cpu_mark = (0.0, 0.0)
        self._numbers = 0
        self._warned_classes: set[str] = set()
        #: Turns longer than ``warn_after`` (also in ``actors.scheduler.slow_turns``).
        self.slow_turns = 0
        #: Workers started in place of a blocked or stuck one.
        self.handoffs = 0

    # -- the queue ---------------------------------------------------------------

    def submit(self, runnable: Runnable) -> None:
        """Put ``runnable`` at the tail of the run queue (any thread)."""
        self._queue.put(runnable)
        if not self._started:
            self._start_pool()

    def _start_pool(self) -> None:
        with self.lock:
            if self._started or self._closed:
                return
            self._started = True
            for _ in range(self.target):
                self._start_worker()

    def queued(self) -> int:
        """Runnables waiting for a worker."""
        return self._queue.qsize()

    def _idle_workers(self) -> int:
        return sum(1 for w in self._workers if w.idle)

    def workers(self) -> dict[str, int]:
        """How many workers exist, and in which state (for status pages and tests)."""
        with self.lock:
            all_ = self._workers
            return {
                "workers": len(all_),
                "idle": self._idle_workers(),
                "blocked": sum(1 for w in all_ if w.blocked),
                "stuck": sum(1 for w in all_ if w.stuck),
                "target": self.target,
                "queued": self._queue.qsize(),
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
            if self._active < self.target and not self._closed and self._queue.qsize() and not self._idle_workers():
                self.handoffs += 1
                self._start_worker()
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
        try:
            worker.cpu_clock = time.pthread_getcpuclockid(threading.get_ident())
        except (AttributeError, OSError):  # pragma: no cover - not Linux
            worker.cpu_clock = None
        get = self._queue.get
        monotonic = time.monotonic
        retire = self.idle_retire
        try:
            while True:
                worker.idle = True
                try:
                    runnable = get(timeout=retire)
                except queue.Empty:
                    worker.idle = False
                    with self.lock:
                        if len(self._workers) > self.target:
                            return  # the pool shrinks back after the blocking is over
                    continue
                worker.idle = False
                if runnable is None:  # closing
                    return
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
            with self.lock:
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
        self._cpu_mark = (time.monotonic(), time.process_time())
        while not self._closed:
            busy = self._check(time.monotonic())
            self._monitor_wake.wait(tick if busy else idle_tick)
            self._monitor_wake.clear()

    def _check(self, now: float) -> bool:
        """One look at the workers; whether any is in a turn (tick faster then)."""
        busy = False
        slow: list[tuple[Worker, float]] = []
        waiting_workers = 0  # stuck in a wait outside the kernel, not computing
        with self.lock:
            for worker in self._workers:
                started = worker.started
                if not started:
                    continue
                busy = True
                took = now - started
                if took >= self.stuck_after:
                    if not worker.stuck:
                        worker.stuck = True
                        if not worker.blocked:
                            self._active -= 1
                    if not worker.blocked and self._waits(worker):
                        waiting_workers += 1
                if took >= self.warn_after and not worker.warned:
                    worker.warned = True
                    slow.append((worker, took))
            waiting = self._queue.qsize()
            if waiting and not self._idle_workers() and not self._closed and not self._gil_busy(now):
                # A worker in its place for each one stuck (the target's
                # worth of workers runs the queue again).  Handlers that wait
                # outside the kernel (not computing) come in bursts -- a
                # hundred actors each sleeping a second -- so as many more
                # as are waiting so: the pool doubles each tick while the
                # burst lasts, rather than growing by the target's worth.
                # Computing ones never do that: more threads than cores
                # only share the GIL.
                want = min(waiting, max(self.target - self._active, 0) + waiting_workers)
                for _ in range(want):
                    self.handoffs += 1
                    self._start_worker()
        for worker, took in slow:
            self._warn(worker, took)
        return busy

    def _gil_busy(self, now: float) -> bool:
        """Whether this process computed for most of the time since the last
        look.  Then the workers that seem stuck are waiting for the GIL, not
        in a sleep or IO: another thread would only wait with them."""
        cpu = time.process_time()
        then, cpu_then = self._cpu_mark
        self._cpu_mark = (now, cpu)
        wall = now - then
        return wall > 0 and (cpu - cpu_then) / wall >= GIL_BUSY

    @staticmethod
    def _waits(worker: Worker) -> bool:
        """Whether a stuck worker spent (almost) no CPU since the last look:
        it sleeps or waits on IO, and another can use the GIL meanwhile."""
        clock = worker.cpu_clock
        if clock is None:
            return True  # no way to tell: take it for waiting, as before
        try:
            used = time.clock_gettime(clock)
        except OSError:  # the thread has just ended
            return False
        spent = used - worker.cpu_mark
        worker.cpu_mark = used
        return spent < 0.0005

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
            for _ in self._workers:
                self._queue.put(None)
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
