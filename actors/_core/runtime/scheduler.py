"""The scheduler of one process: actors run as objects on a few worker threads.

An actor is not a thread.  It is a `Runnable` with a mailbox; when mail
comes to an idle one it goes on the run queue, and a worker takes it,
handles a bounded batch of its entries (``throughput``, as Akka's dispatcher
throughput and the BEAM's reductions: an actor with a million messages
waiting does not starve the rest), and puts it back at the tail if more is
waiting.  One worker runs an actor at a time, so an actor's callbacks never
run concurrently.

**How many run the queue.**  ``target`` workers take from the run queue at
once: one under CPython's GIL, where two threads running Python code only
take turns (and pay for each switch: a tree of 100,000 actors spawning and
stopping took 4.4 s on one worker and 16 s on four, on a 2-core machine);
the CPUs this process may run on where the interpreter has no GIL.  A
process's parallelism comes from processes (hosts), each with a scheduler.

Python code may block, and an actor's handler is allowed to.  Two ways,
both kept from stalling the process:

- **In the kernel** (a call waiting for its reply, a spawn waiting for the
  child's ``init``, a monitor's wait): the worker says so (`block`), stops
  counting against the target, and a spare takes the queue in its place --
  as Java's ``ForkJoinPool.managedBlock`` and Go's hand-off of a P on a
  syscall.  When the wait is over the worker finishes its turn and, the
  target being met, parks as a spare.
- **Outside it** (``time.sleep``, file or socket IO, a C extension, a long
  loop): a monitor thread (Go's ``sysmon``) looks every few milliseconds.
  A worker in one turn longer than ``stuck_after`` whose thread uses CPU is
  computing: a spare takes the queue in its place (once).  One whose CPU
  time stands still while the process has the GIL to spare is asleep or in
  IO, and such handlers come in bursts (a hundred actors each sleeping a
  second): the monitor brings in as many spares again as there are such
  workers, while work waits, so the pool doubles each tick.  One whose CPU
  time stands still while the process computes is only waiting for the GIL:
  nothing is added for it, since another thread would wait with it.  A turn
  longer than ``warn_after`` is logged once per actor class with the
  worker's stack, and counted (``actors.scheduler.slow_turns``).

Spares are parked threads, woken in a few microseconds; ``spares`` of them
are made with the pool, more on demand up to ``max_workers`` threads in
all, and a spare parked for ``idle_retire`` seconds beyond those ends.

The scheduler knows nothing of cells: a `Runnable` is anything with a
``turn()`` to run on a worker.
"""

from __future__ import annotations

import gc
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
    "SPARE_WORKERS",
    "STUCK_AFTER",
    "Scheduler",
    "THROUGHPUT",
    "WARN_AFTER",
    "Worker",
    "default_workers",
    "scheduler_from_config",
    "tune_host_process",
]

log = logging.getLogger("actors.scheduler")

#: Entries an actor handles in one turn before the others get theirs.
THROUGHPUT = 64
#: Parked workers made with the pool, so the first hand-offs start no thread.
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
#: Seconds a spare beyond ``spares`` stays parked before its thread ends.
IDLE_RETIRE = 2.0
#: The most worker threads one process runs at once (blocked ones included).
MAX_WORKERS = 1024
#: The share of one CPU the process must have used since the monitor's last
#: look for a worker whose CPU time stands still to be taken for waiting on
#: the GIL rather than asleep.
GIL_BUSY = 0.8
#: CPU seconds a worker must have used since the monitor's last look to count as computing.
COMPUTING = 0.0005


def default_workers() -> int:
    """Workers that run the queue at once: one under the GIL, else one per CPU."""
    is_gil_enabled = getattr(sys, "_is_gil_enabled", None)
    if is_gil_enabled is None or is_gil_enabled():
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class Runnable(Protocol):
    """What a worker runs: one turn of an actor (a batch of its mail)."""

    def turn(self) -> None:
        """Handle some of the mail; put itself back on the queue if more waits."""


class Worker:
    """One worker thread's record.  Its thread writes ``started``, ``running``
    and ``idle``; the rest change under the scheduler's lock.  The monitor
    reads them without it (the GIL makes each write atomic; a stale read
    only delays a decision by one tick)."""

    __slots__ = (
        "thread",
        "started",
        "running",
        "blocked",
        "stuck",
        "warned",
        "cpu_clock",
        "cpu_mark",
        "idle",
        "wake",
        "parked",
        "more_to_run",
    )

    def __init__(self, queued: Callable[[], int]) -> None:
        self.thread: threading.Thread | None = None
        #: ``time.monotonic()`` when the turn in hand began (0.0: between turns).
        self.started = 0.0
        #: What it runs now (for the warning's name).
        self.running: Any = None
        #: Blocked in the kernel (`Scheduler.block`, nested): not counted against the target.
        self.blocked = 0
        #: Taken for blocked outside the kernel by the monitor, this turn.
        self.stuck = False
        #: This turn was logged as slow already.
        self.warned = False
        #: The thread's CPU-time clock (None where the platform has none), and
        #: its reading at the monitor's last look.
        self.cpu_clock: int | None = None
        self.cpu_mark = -1.0
        #: Waiting for work on the run queue.
        self.idle = False
        #: Set to unpark it.
        self.wake = threading.Event()
        #: Parked as a spare (under the lock).
        self.parked = False
        #: How many runnables wait on its run queue (nonzero: it will not wait
        #: for work after this turn, so it keeps the GIL unless it yields).
        self.more_to_run = queued


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
        if spares < 0:
            raise ValueError(f"spares must be at least 0, got {spares!r}")
        if max_workers < workers + spares:
            raise ValueError(f"max_workers ({max_workers}) is below workers + spares ({workers + spares})")
        if throughput < 1:
            raise ValueError(f"throughput must be at least 1, got {throughput!r}")
        #: Workers that run the queue at once while none is blocked.
        self.target = workers
        self.spares = spares
        self.max_workers = max_workers
        self.throughput = throughput
        self.stuck_after = stuck_after
        self.warn_after = warn_after
        self.idle_retire = idle_retire
        self.stats = stats
        self.name = name
        self._on_worker_exit = on_worker_exit
        # The run queue: a C queue, so that a wake-up costs one put and an
        # idle worker is handed its runnable without a Python condition.
        # None tells the worker that takes it to end.
        self._queue: queue.SimpleQueue[Runnable | None] = queue.SimpleQueue()
        self._started = False
        #: Guards the workers' table, their counts and the parked list (not the queue).
        self.lock = threading.Lock()
        self._workers: list[Worker] = []
        self._parked: list[Worker] = []
        #: Workers that run the queue: neither blocked, stuck nor parked.
        self._active = 0
        #: Runners allowed beyond the target while handlers sleep outside
        #: the kernel (the monitor's last count of them).
        self._burst = 0
        self._monitor: threading.Thread | None = None
        self._monitor_wake = threading.Event()
        self._closed = False
        self._cpu_mark = (0.0, 0.0)
        self._numbers = 0
        self._warned_classes: set[str] = set()
        #: Turns longer than ``warn_after`` (also in ``actors.scheduler.slow_turns``).
        self.slow_turns = 0
        #: Spares that took the queue from a blocked or stuck worker.
        self.handoffs = 0

    # -- the queue ---------------------------------------------------------------

    def submit(self, runnable: Runnable) -> None:
        """Put ``runnable`` at the tail of the run queue (any thread)."""
        self._queue.put(runnable)
        if self._active < self.target:  # a runner blocked with nothing waiting then: one now
            if not self._started:
                self._start_pool()
            else:
                self._replenish()

    def _replenish(self) -> None:
        with self.lock:
            while self._active < self.target and not self._closed and len(self._workers) < self.max_workers:
                self.handoffs += 1
                self._add_runner()

    def _start_pool(self) -> None:
        with self.lock:
            if self._started or self._closed:
                return
            self._started = True
            for _ in range(self.target):
                self._start_worker(parked=False)
            for _ in range(self.spares):
                self._start_worker(parked=True)
            self._monitor = threading.Thread(target=self._watch, name=f"{self.name}-sysmon", daemon=True)
            self._monitor.start()

    def queued(self) -> int:
        """Runnables waiting for a worker."""
        return self._queue.qsize()

    def workers(self) -> dict[str, int]:
        """How many workers exist, and in which state (for status pages and tests)."""
        with self.lock:
            all_ = self._workers
            return {
                "workers": len(all_),
                "active": self._active,
                "parked": len(self._parked),
                "idle": sum(1 for w in all_ if w.idle),
                "blocked": sum(1 for w in all_ if w.blocked),
                "stuck": sum(1 for w in all_ if w.stuck),
                "target": self.target,
                "queued": self._queue.qsize(),
                "handoffs": self.handoffs,
            }

    # -- blocking -----------------------------------------------------------------

    def block(self) -> Worker | None:
        """The calling thread is about to wait in the kernel.  On a worker:
        it stops counting against the target, and a spare takes the queue
        in its place.  Returns what `unblock` takes (None off the pool)."""
        worker = thread_state.worker
        if worker is None:
            return None
        with self.lock:
            worker.blocked += 1
            if worker.blocked == 1 and not worker.stuck:
                self._active -= 1
                # A spare now only if work waits; else the next `submit` sees the
                # runner missing and brings one in (most waits are short).
                if self._active < self.target and not self._closed and self._queue.qsize():
                    self.handoffs += 1
                    self._add_runner()
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
        """The wait `block` announced is over: the worker finishes its turn
        (and parks after it if the target is met without it)."""
        if worker is None:
            return
        with self.lock:
            worker.blocked -= 1
            if worker.blocked == 0 and not worker.stuck:
                self._active += 1

    # -- workers ------------------------------------------------------------------

    def _add_runner(self) -> None:
        """One more worker on the queue (under ``lock``): a parked spare, else a new thread."""
        while self._parked:
            spare = self._parked.pop()
            if spare.parked:
                spare.parked = False
                self._active += 1
                spare.wake.set()
                return
        self._start_worker(parked=False)

    def _start_worker(self, parked: bool) -> None:
        """A new worker thread (under ``lock``); at most ``max_workers``."""
        if len(self._workers) >= self.max_workers:
            return
        worker = Worker(self._queue.qsize)
        self._numbers += 1
        thread = threading.Thread(
            target=self._run, args=(worker,), name=f"{self.name}-worker-{self._numbers}", daemon=True
        )
        worker.thread = thread
        self._workers.append(worker)
        if parked:
            worker.parked = True
            self._parked.append(worker)
        else:
            self._active += 1
        thread.start()

    def _run(self, worker: Worker) -> None:
        state = thread_state
        state.worker = worker
        try:
            worker.cpu_clock = time.pthread_getcpuclockid(threading.get_ident())
        except (AttributeError, OSError):  # pragma: no cover - not Linux
            worker.cpu_clock = None
        get = self._queue.get
        monotonic = time.monotonic
        try:
            while True:
                if worker.parked or self._active > self.target + self._burst:
                    if not self._park(worker):
                        return
                    continue
                worker.idle = True
                try:
                    runnable = get(timeout=self.idle_retire)
                except queue.Empty:
                    continue
                finally:
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
                if worker.parked:
                    worker.parked = False
                    if worker in self._parked:
                        self._parked.remove(worker)
                elif not worker.blocked and not worker.stuck:
                    self._active -= 1
            state.worker = None
            if self._on_worker_exit is not None:
                try:
                    self._on_worker_exit()
                except Exception:  # noqa: BLE001 - a worker's end must not raise
                    log.debug("scheduler %s: cleanup of an ending worker failed", self.name, exc_info=True)

    def _park(self, worker: Worker) -> bool:
        """Wait as a spare until a hand-off needs this worker; False: end the thread."""
        with self.lock:
            if self._closed:
                return False
            if not worker.parked:
                if self._active <= self.target + self._burst:
                    return True  # needed after all
                self._active -= 1
                worker.parked = True
                worker.wake.clear()
                self._parked.append(worker)
        woken = worker.wake.wait(self.idle_retire)
        with self.lock:
            if self._closed:
                return False
            if woken or not worker.parked:
                return True  # `_add_runner` counted it active again
            if len(self._workers) > self.target + self.spares:
                self._parked.remove(worker)  # still marked parked: `_run`'s end counts it out so
                return False
            return True  # one of the spares kept: park again

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
        gil_busy = self._gil_busy(now)
        asleep = 0  # stuck in a wait outside the kernel, not computing
        with self.lock:
            for worker in self._workers:
                started = worker.started
                if not started:
                    continue
                busy = True
                took = now - started
                if took >= self.stuck_after and not worker.blocked:
                    computing = self._computing(worker)
                    if computing or not gil_busy:
                        if not worker.stuck:
                            worker.stuck = True
                            self._active -= 1
                        if not computing:
                            asleep += 1
                if took >= self.warn_after and not worker.warned:
                    worker.warned = True
                    slow.append((worker, took))
            self._burst = asleep
            if not self._closed:
                want = self.target - self._active
                if asleep:
                    want += min(self._queue.qsize(), asleep)
                for _ in range(want):
                    self.handoffs += 1
                    self._add_runner()
        for worker, took in slow:
            self._warn(worker, took)
        return busy

    def _gil_busy(self, now: float) -> bool:
        """Whether this process computed for most of the time since the last look."""
        cpu = time.process_time()
        then, cpu_then = self._cpu_mark
        self._cpu_mark = (now, cpu)
        wall = now - then
        return wall > 0 and (cpu - cpu_then) / wall >= GIL_BUSY

    @staticmethod
    def _computing(worker: Worker) -> bool:
        """Whether a worker used CPU since the monitor's last look (the first
        look only takes the reading: it counts as computing)."""
        clock = worker.cpu_clock
        if clock is None:
            return False  # no way to tell: taken for waiting
        try:
            used = time.clock_gettime(clock)
        except OSError:  # the thread has just ended
            return True
        last, worker.cpu_mark = worker.cpu_mark, used
        return last < 0 or used - last >= COMPUTING

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
        """Let every worker end (at process shutdown): parked ones at once,
        the others once they are back from their turn."""
        with self.lock:
            self._closed = True
            for worker in self._workers:
                self._queue.put(None)
                worker.wake.set()
        self._monitor_wake.set()


#: How many younger collections a host lets pass before a full one (Python's default is 10).
HOST_GC_FULL_AFTER = 1000


def tune_host_process(config: Config) -> None:
    """Set what a host process's interpreter does on its own schedule: how
    often the cyclic garbage collector walks every object (``[scheduler]
    gc_full_after``, default 1,000 younger collections) and, when set, the
    GIL's switch interval (``[scheduler] switch_interval_ms``; Python's 5 ms
    otherwise: a worker that answers a call while others wait to run yields
    the GIL to its caller itself, so the interval does not set a call's
    latency).

    A full collection walks every object the process holds; with 100,000
    actors that is a million objects and a pause of 100-300 ms, and at
    Python's default one came every few hundred thousand allocations: 100,000
    idle timeouts came up to 2.3 s late, 1.6 s with full collections a
    hundred times rarer (and 1.2 s with none).  Actors free their state by
    reference counting (a dead actor's cycles are broken), so little waits
    for the full collection.  (The host program keeps its own settings: the
    process is the program's.)"""
    ms = config.get_float("scheduler", "switch_interval_ms", 0.0)
    if ms < 0:
        raise ConfigError(f"[scheduler] switch_interval_ms must be positive, got {ms!r}")
    full_after = config.get_integer("scheduler", "gc_full_after", HOST_GC_FULL_AFTER)
    if full_after < 1:
        raise ConfigError(f"[scheduler] gc_full_after must be at least 1, got {full_after!r}")
    if ms:
        sys.setswitchinterval(ms / 1000.0)
    young, middle, _full = gc.get_threshold()
    gc.set_threshold(young, middle, full_after)


def scheduler_from_config(config: Config, **kwargs: Any) -> Scheduler:
    """A scheduler set by the ``[scheduler]`` section: ``workers`` (default:
    one under the GIL, else the CPUs this process may run on), ``spares``,
    ``max_workers``, ``throughput``, ``stuck_after_ms``, ``warn_after_ms``."""
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
