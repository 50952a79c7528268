"""The main job: boot the whole node, drive a real workload under chaos, check nothing was lost.

``python -m actors demo`` starts the application (`actors.couch.start_app`:
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
import os
import shutil
import sys
import tempfile
import time
from typing import Any

from actors import Node
from actors.config import Config
from actors.couch_jobs.errors import StoreUnavailable
from actors.couch_jobs.local_postgres import local_postgres
from actors.couch_jobs.store_postgres import redact

__all__ = ["DEMO_CONFIG", "run_demo"]

#: Settings that make a minute show everything: short intervals, small files,
#: more replications than slots.  An ``--config`` file overrides any of them.
DEMO_CONFIG: dict[str, dict[str, str]] = {
    "couch": {"intensity": "30", "period": "10"},
    "ioq2": {"enabled": "true"},
    "smoosh": {"wait_secs": "0.5", "staleness": "0", "persist": "true"},
    "smoosh.ratio_dbs": {"min_size": "65536", "concurrency": "2"},
    "replicator": {"max_jobs": "3", "max_churn": "3", "interval": "500", "backoff_interval": "0.5",
                   "health_threshold": "3"},
    "couch_jobs": {"activity_monitor_max_jitter_msec": "200", "type_check_period_msec": "1000",
                   "type_check_max_jitter_msec": "200"},
}

#: smoosh's fixed intervals, shortened so checkpoints and retries happen within the run.
SMOOSH_OVERRIDES = {"checkpoint_interval": 1.0, "re_enqueue_delay": 1.0, "status_interval": 0.5,
                    "access_clean_interval": 1.0}

SHORT_DURATION = 6.0
SHORT_MIN_KILL_RATE = 1.5


def _config(path: str | None) -> Config:
    cfg = Config(DEMO_CONFIG)
    if path:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"--config {path!r} does not exist")
        cfg.load_ini(path)
    return cfg


def _state_dir(requested: str | None) -> tuple[str, bool]:
    """A fresh directory: ``requested`` if empty or new, else a new run-<time> folder inside it."""
    if requested is None:
        return tempfile.mkdtemp(prefix="couch-demo-"), True
    path = os.path.abspath(requested)
    if os.path.isdir(path) and os.listdir(path):
        path = os.path.join(path, time.strftime("run-%Y%m%d-%H%M%S"))
    os.makedirs(path, exist_ok=True)
    return path, False


def run_demo(args: Any) -> int:
    duration = SHORT_DURATION if args.short else args.duration
    rate = max(args.kill_rate, SHORT_MIN_KILL_RATE) if args.short else args.kill_rate
    grace = 45.0 if args.short else 60.0
    live = sys.stdout.isatty() and not args.no_live
    try:
        cfg = _config(args.config)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    state_dir, temporary = _state_dir(args.state_dir)
    seed = args.seed
    with contextlib.ExitStack() as stack:
        store = getattr(args, "store", "sqlite")
        if store != "sqlite":  # couch_jobs on PostgreSQL: a throwaway server, or the URL given
            url = store
            if store == "postgres":
                try:
                    url = stack.enter_context(local_postgres(os.path.join(state_dir, "postgres")))
                except StoreUnavailable as exc:
                    print(f"error: {exc}", file=sys.stderr)
                    return 2
            elif not store.startswith(("postgresql://", "postgres://")):
                print(f"error: --store {redact(store)!r} is not sqlite, postgres or a postgresql:// URL",
                      file=sys.stderr)
                return 2
            cfg.set("couch_jobs", "database_path", url)
            print(f"couch_jobs store: PostgreSQL at {redact(url)}", flush=True)
        with Node() as node:
            ok = _run(node, cfg, state_dir, duration, rate, grace, live, seed, short=args.short)
    if ok and temporary:
        shutil.rmtree(state_dir, ignore_errors=True)
    elif not ok:
        print(f"state directory kept for inspection: {state_dir}")
    return 0 if ok else 1


def _run(node: Node, cfg: Config, state_dir: str, duration: float, rate: float, grace: float, live: bool,
         seed: int | None, *, short: bool) -> bool:
    from actors.couch import start_app
    from actors.workload import (
        DbWriter,
        IoqReaders,
        JobsDriver,
        Killer,
        Replications,
        SmooshObserver,
        start_workload,
    )
    from actors.workload.ioq_reads import make_files
    from actors.workload.view import LiveView

    t0 = time.monotonic()
    print(f"node up, runtime directory {node.rundir} (attach: python -m actors status {node.rundir})", flush=True)
    writer_box: list[Any] = []
    observer = node.spawn(SmooshObserver, lambda ev, rest: writer_box and writer_box[0].on_event(ev, rest))
    app = start_app(node, cfg, state_dir, smoosh_overrides=SMOOSH_OVERRIDES, smoosh_observer=observer)
    n_servers = len([a for a in node.actors() if str(a.get("registered") or "").startswith("ioq_server_")])
    print(f"application up in {time.monotonic() - t0:.1f} s: {len(node.actors())} actors, "
          f"{len(node.hosts())} host processes, {n_servers} IOQ2 servers; state directory {state_dir}", flush=True)

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
    print(f"workload: {len(files)} files read through IOQ, {len(writer.dbs)} databases for smoosh, "
          f"{repl.n_jobs} replications (max_jobs {cfg.get('replicator', 'max_jobs')}), 3 couch_jobs workers in "
          f"their own processes; killing {rate:g}/s for {duration:g} s", flush=True)

    for d in (writer, reads, jobs, repl, killer):
        d.start()
    start = time.monotonic()
    every = 1.0 if live else (2.0 if short else 5.0)
    next_show = start + (0 if live else every)
    try:
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
    finally:
        killer.stop()
        for d in (jobs, writer, repl, reads):
            d.stop()
    if live:
        print("\x1b[2J\x1b[H" + view.render(time.monotonic() - start, "stopped"), flush=True)
    print(f"load stopped after {time.monotonic() - start:.1f} s; {killer.summary()}", flush=True)

    settle_start = time.monotonic()
    deadline = settle_start + grace
    jobs.settle(deadline)
    repl.settle(deadline)
    writer.settle(deadline)
    print(f"grace period: outstanding work finished in {time.monotonic() - settle_start:.1f} s "
          f"(bound {grace:.0f} s)", flush=True)

    checks = [jobs.check(), repl.check(), writer.check(), reads.check()]
    counters = node.stats()["counters"]
    restarts = view.restarts(counters)
    escalations = {k[len("supervision.escalations."):]: v for k, v in counters.items()
                   if k.startswith("supervision.escalations.") and v}
    top_alive = app.top.is_alive()

    print()
    print("=" * 72)
    print(f"summary ({duration:g} s of load, kill rate {rate:g}/s, seed {seed})")
    print(killer.summary())
    print("restarts per supervisor: " + (", ".join(f"{k} {v}" for k, v in sorted(restarts.items())) or "none"))
    print("escalations: " + (", ".join(f"{k} {v}" for k, v in sorted(escalations.items())) or "none")
          + f"; couch_sup {'up' if top_alive else 'DOWN'}")
    for c in checks:
        for line in c.lines:
            print(line)
    errors = {name: d.errors for name, d in drivers.items() if d.errors}
    if errors:
        print("driver errors (retried): " + "; ".join(
            f"{n}: " + ", ".join(f"{k} x{v}" for k, v in e.items()) for n, e in errors.items()))
    lost = sum(c.lost for c in checks)
    ok = lost == 0 and top_alive
    print("RESULT: nothing lost" if ok else f"RESULT: FAILED -- {lost} items lost"
          + ("" if top_alive else ", couch_sup is down"))
    print("=" * 72, flush=True)

    node.stop(workload_sup, "shutdown", timeout=30)
    repl.close()
    app.stop()
    return ok
