"""The main job: boot the whole node, drive a real workload under chaos, check nothing was lost.

``python -m actors demo`` starts the application (`actors.app.couch.start_app`:
IOQ, couch_jobs, smoosh, the replicator under ``couch_sup``) in a fresh
state directory, then for ``--duration`` seconds:

* writes SQLite databases and announces them to smoosh, which compacts them;
* reads real files through IOQ and checks every byte;
* replicates growing databases through more continuous jobs than the
  scheduler may run at once, so they rotate;
* adds couch_jobs jobs that workers in several host processes finish;
* kills actors and SIGKILLs host processes at ``--kill-rate`` per second;

showing the supervision tree live.  Then the load stops, the services get a
bounded grace period to finish outstanding work, and the summary checks
that nothing was lost; the exit status is 1 if anything was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors import Node
from actors.app import configcheck
from actors.app.couch import start_app
from actors.app.workload import (
    Check,
    DbWriter,
    IoqReaders,
    JobsDriver,
    Killer,
    Replications,
    SmooshObserver,
    start_workload,
)
from actors.app.workload.ioq_reads import make_files
from actors.app.workload.view import LiveView
from actors.config import Config, ConfigError
from actors.couch_jobs.local_postgres import local_postgres
from actors.couch_jobs.store_postgres import redact
from actors.interrupt import deferred, exit_status

__all__ = ["DEMO_CONFIG", "Outcome", "load_config", "result_line", "run_demo"]

#: Settings that make a minute show everything: short intervals, small files,
#: more replications than slots.  An ``--config`` file overrides any of them.
DEMO_CONFIG: dict[str, dict[str, str]] = {
    "couch": {"intensity": "30", "period": "10"},
    "ioq2": {"enabled": "true"},
    "smoosh": {"wait_secs": "0.5", "staleness": "0", "persist": "true"},
    "smoosh.ratio_dbs": {"min_size": "65536", "concurrency": "2"},
    "replicator": {
        "max_jobs": "3",
        "max_churn": "3",
        "interval": "500",
        "backoff_interval": "0.5",
        "health_threshold": "3",
    },
    "couch_jobs": {
        "activity_monitor_max_jitter_msec": "200",
        "type_check_period_msec": "1000",
        "type_check_max_jitter_msec": "200",
    },
}

#: smoosh's fixed intervals, shortened so checkpoints and retries happen within the run.
SMOOSH_OVERRIDES = {
    "checkpoint_interval": 1.0,
    "re_enqueue_delay": 1.0,
    "status_interval": 0.5,
    "access_clean_interval": 1.0,
}

SHORT_DURATION = 6.0
SHORT_MIN_KILL_RATE = 1.5


def load_config(path: str | None, warn: Callable[[str], None] | None = None) -> Config:
    """The demo settings overridden by ``path``, checked before anything boots.

    Unknown sections and keys go to ``warn`` by name (a typo must not pass
    unnoticed); bad values raise `ConfigError` naming file, section, key and
    value.  An unreadable or malformed file raises `OSError` or
    `configparser.Error`, which name the file.
    """
    cfg = Config(DEMO_CONFIG)
    if path:
        if not os.path.isfile(path):
            raise FileNotFoundError(errno.ENOENT, "config file not found", path)
        cfg.load_ini(path)
    result = configcheck.check(cfg)
    where = f"{path}: " if path else ""
    for line in result.warnings:
        (warn or _warn)(f"{where}{line}")
    if result.errors:
        raise ConfigError(where + "; ".join(result.errors))
    return cfg


def _warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr, flush=True)


def _state_dir(requested: str | None) -> tuple[str, bool]:
    """A fresh directory: ``requested`` if empty or new, else a new run-<time> folder inside it."""
    if requested is None:
        return tempfile.mkdtemp(prefix="couch-demo-"), True
    path = os.path.abspath(requested)
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(errno.ENOTDIR, "--state-dir is not a directory", path)
    if os.path.isdir(path) and os.listdir(path):
        path = os.path.join(path, time.strftime("run-%Y%m%d-%H%M%S"))
    os.makedirs(path, exist_ok=True)
    return path, False


def run_demo(
    args: Any,
    *,
    make_node: Callable[[str, int | None], Node] | None = None,
    body: Callable[..., None] | None = None,
    observe: Callable[..., Any] | None = None,
) -> int:
    """``otpy demo``: 0 when nothing was lost, 1 when something was, 130/143 when interrupted.

    A temporary state directory is removed however the run ends, except
    when a check failed: then it is kept, and named, for inspection.
    ``make_node(state_dir, metrics_port)`` and ``body`` (`_run`'s signature) are how
    ``demo --nodes N`` (`actors.app.demo_cluster`) runs its controller instead
    of the single node.  ``observe(node, port=)`` serves the observer page
    for ``--observe`` (the command line passes `actors.tools.observer.observe`: a
    tool over the application, which the application does not import).
    """
    duration = SHORT_DURATION if args.short else args.duration
    rate = max(args.kill_rate, SHORT_MIN_KILL_RATE) if args.short else args.kill_rate
    grace = 45.0 if args.short else 60.0
    live = sys.stdout.isatty() and not args.no_live
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    cfg = load_config(args.config)
    state_dir, temporary = _state_dir(args.state_dir)
    outcome = Outcome()
    try:
        print(f"seed {seed} (repeat this run with --seed {seed})", flush=True)
        with contextlib.ExitStack() as stack:
            store = getattr(args, "store", "sqlite")
            if store != "sqlite":  # couch_jobs on PostgreSQL: a throwaway server, or the URL given
                url = (
                    stack.enter_context(local_postgres(os.path.join(state_dir, "postgres")))
                    if store == "postgres"
                    else store
                )
                cfg.set("couch_jobs", "store", url)
                print(f"couch_jobs store: PostgreSQL at {redact(url)}", flush=True)
            metrics = getattr(args, "metrics", None)
            node = make_node(state_dir, metrics) if make_node is not None else Node(metrics=metrics)
            web = None
            try:
                if node.metrics_server is not None:
                    print(
                        f"metrics: {node.metrics_server.url} (scrape it with Prometheus: docs/metrics.md)", flush=True
                    )
                if getattr(args, "observe", None) is not None:
                    if observe is None:
                        raise ValueError("demo --observe: no observer given (observe=actors.tools.observer.observe)")
                    web = observe(node, port=args.observe)
                    print(f"observer: {web.url}", flush=True)
                (body or _run)(node, cfg, state_dir, duration, rate, grace, live, seed, outcome, short=args.short)
            finally:
                with deferred():
                    if web is not None:
                        web.close()
                    node.close()
    finally:
        if temporary and outcome.ok is not False:
            shutil.rmtree(state_dir, ignore_errors=True)
    if outcome.ok is False:
        print(f"state directory kept for inspection: {state_dir}", flush=True)
    if outcome.interrupted:
        return outcome.interrupted
    return 0 if outcome.ok else 1


@dataclass
class Outcome:
    """How `_run` ended: ``ok`` None until judged; ``interrupted`` the exit status of a signal."""

    ok: bool | None = None
    interrupted: int | None = None


def result_line(checks: list[Check], failed_calls: int, top_alive: bool) -> str:
    """The verdict, saying what "nothing lost" counted and what it did not."""
    lost = sum(c.lost for c in checks)
    counted = ", ".join(c.counted for c in checks if c.counted) or "nothing"
    expected = (
        f"; {failed_calls} calls failed with an exit reason under kills (expected, not lost)" if failed_calls else ""
    )
    if lost == 0 and top_alive:
        return f"RESULT: nothing lost -- checked {counted}{expected}"
    where = ", ".join(f"{c.name} {c.lost}" for c in checks if c.lost)
    return (
        f"RESULT: FAILED -- {lost} items lost"
        + (f" ({where})" if where else "")
        + f" of {counted}"
        + ("" if top_alive else ", couch_sup is down")
        + expected
    )


def _run(
    node: Node,
    cfg: Config,
    state_dir: str,
    duration: float,
    rate: float,
    grace: float,
    live: bool,
    seed: int,
    outcome: Outcome,
    *,
    short: bool,
) -> None:
    t0 = time.monotonic()
    print(f"node up, runtime directory {node.rundir} (attach: otpy status {node.rundir})", flush=True)
    writer_box: list[Any] = []
    observer = node.spawn(SmooshObserver, lambda ev, rest: writer_box and writer_box[0].on_event(ev, rest))
    app = start_app(node, cfg, state_dir, smoosh_overrides=SMOOSH_OVERRIDES, smoosh_observer=observer)
    n_servers = len([a for a in node.actors() if str(a.get("registered") or "").startswith("ioq_server_")])
    print(
        f"application up in {time.monotonic() - t0:.1f} s: {len(node.actors())} actors, "
        f"{len(node.hosts())} host processes, {n_servers} IOQ2 servers; state directory {state_dir}",
        flush=True,
    )

    files = make_files(os.path.join(state_dir, "ioq"), count=max(2, 2 * n_servers), size=256 * 1024, seed=seed)
    workload_sup = start_workload(node, [p for p, _ in files], workers=3)
    writer = DbWriter(node, app.data_dir, app.smoosh_state_dir, dbs=6 if short else 10, seed=seed)
    writer_box.append(writer)
    reads = IoqReaders(node, files, threads=2, seed=seed)
    jobs = JobsDriver(node, batch=2, period=0.1)
    repl = Replications(node, os.path.join(state_dir, "replication"), jobs=6 if short else 8, seed=seed)
    killer = Killer(node, [app.top, workload_sup], rate, seed=seed)
    jobs.setup()
    repl.setup()
    drivers = {"smoosh": writer, "ioq": reads, "jobs": jobs, "replication": repl, "killer": killer}
    view = LiveView(node, app, drivers, duration)

    banner = (
        f"workload (seed {seed}): {len(files)} files read through IOQ, {len(writer.dbs)} databases "
        f"for smoosh, {repl.n_jobs} replications (max_jobs {cfg.get('replicator', 'max_jobs')}), "
        f"3 couch_jobs workers in their own processes; killing {rate:g}/s for {duration:g} s"
    )
    try:
        start = _load(view, (writer, reads, jobs, repl, killer), duration, live, short, outcome, banner)
        with deferred():
            _report(
                node,
                app,
                view,
                [killer],
                drivers,
                (jobs, repl, writer, reads),
                duration,
                rate,
                seed,
                grace,
                start,
                live,
                outcome,
            )
    finally:
        with deferred():
            try:
                node.stop(workload_sup, "shutdown", timeout=30)
            except Exception:  # already gone (killed, or the node is closing): nothing left to stop
                pass
            repl.close()
            app.stop()


def _load(
    view: LiveView, drivers: tuple[Any, ...], duration: float, live: bool, short: bool, outcome: Outcome, banner: str
) -> float:
    """Start the drivers, show the view for ``duration`` s (or until Ctrl-C/SIGTERM), stop the drivers;
    returns when the load started."""
    start = time.monotonic()
    every = 1.0 if live else (2.0 if short else 5.0)
    next_show = start + (0 if live else every)
    try:
        try:
            for d in drivers:
                d.start()
            print(banner, flush=True)
            for _ in range(int(duration / 0.1) + 10):
                now = time.monotonic()
                if now - start >= duration:
                    break
                if now >= next_show:
                    next_show += every
                    if live:
                        print("\x1b[2J\x1b[H" + view.render(now - start), flush=True)
                    else:
                        print(view.progress_line(now - start), flush=True)
                time.sleep(min(0.1, max(0.0, start + duration - now)))  # pacing the display, not synchronisation
        except KeyboardInterrupt as exc:
            outcome.interrupted = exit_status(exc)
    finally:
        with deferred():
            for d in reversed(drivers):
                d.stop()
    return start


def _report(
    node: Node,
    app: Any,
    view: LiveView,
    killers: list[Any],
    drivers: dict[str, Any],
    checked: tuple[Any, ...],
    duration: float,
    rate: float,
    seed: int,
    grace: float,
    start: float,
    live: bool,
    outcome: Outcome,
) -> None:
    """Settle (unless interrupted), check and print the summary; sets ``outcome.ok``.

    ``checked``: what has a ``check()`` (and maybe a ``settle(deadline)``), in
    settling and printing order; ``killers``: what has a ``summary()``.
    """
    ran = time.monotonic() - start
    if live:
        print("\x1b[2J\x1b[H" + view.render(ran, "stopped"), flush=True)
    if outcome.interrupted:
        print(
            f"INTERRUPTED after {ran:.1f} s of load: workload stopped, no grace period; partial summary "
            f"follows (items still in flight are not judged lost)",
            flush=True,
        )
    else:
        print(f"load stopped after {ran:.1f} s; " + "; ".join(k.summary() for k in killers), flush=True)
        settle_start = time.monotonic()
        deadline = settle_start + grace
        for d in checked:
            settle = getattr(d, "settle", None)
            if settle is not None:
                settle(deadline)
        print(
            f"grace period: outstanding work finished in {time.monotonic() - settle_start:.1f} s (bound {grace:.0f} s)",
            flush=True,
        )

    checks = [d.check() for d in checked]
    counters = node.stats()["counters"]
    restarts = view.restarts(counters)
    escalations = {
        k[len("supervision.escalations.") :]: v
        for k, v in counters.items()
        if k.startswith("supervision.escalations.") and v
    }
    top_alive = app.top.is_alive()

    print()
    print("=" * 72)
    print(
        ("PARTIAL " if outcome.interrupted else "")
        + f"summary ({ran:.1f} of {duration:g} s of load, kill rate {rate:g}/s, seed {seed})"
    )
    for k in killers:
        print(k.summary())
    where = f" (on {node.name})" if node.name else ""  # demo --nodes: the controller's counters
    print(f"restarts per supervisor{where}: " + (", ".join(f"{k} {v}" for k, v in sorted(restarts.items())) or "none"))
    print(
        "escalations: "
        + (", ".join(f"{k} {v}" for k, v in sorted(escalations.items())) or "none")
        + f"; couch_sup {'up' if top_alive else 'DOWN'}"
    )
    for c in checks:
        for line in c.lines:
            print(line)
    # Drivers count their errors by kind; the node set's are sentences, already in its check's lines.
    errors = {name: d.errors for name, d in drivers.items() if d.errors and isinstance(d.errors, dict)}
    if errors:
        print(
            "driver errors (retried): "
            + "; ".join(f"{n}: " + ", ".join(f"{k} x{v}" for k, v in e.items()) for n, e in errors.items())
        )
    failed = sum(c.failed for c in checks)
    if outcome.interrupted:
        print(
            f"RESULT: interrupted after {ran:.1f} s -- not judged (checked so far: "
            f"{', '.join(c.counted for c in checks if c.counted)})"
        )
    else:
        outcome.ok = sum(c.lost for c in checks) == 0 and top_alive
        print(result_line(checks, failed, top_alive))
    print("=" * 72, flush=True)
