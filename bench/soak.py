"""Soak: does anything grow while supervisors restart what is killed?

Run ``python bench/soak.py`` (30 minutes per scenario at 1 kill/s) or
``--quick`` (about 20 s per scenario at 2 kills/s, what ``otpy bench``
runs).  Scenarios, each a real ``python -m actors demo`` run as a user
would start it:

* ``main``: the main job on one node (IOQ, couch_jobs, smoosh, the
  replicator under load; actors killed and host processes SIGKILLed);
* ``cluster``: ``demo --nodes 3``, a controller and three node processes,
  whole nodes SIGKILLed and restarted besides.

Every ``--interval`` seconds every process of the run's tree is read from
``/proc`` (`actors.tools.census`): RSS, threads, open fds by kind (sockets, pipes,
eventfds, pidfds, SQLite files...).  The kills come from the demo's own
progress lines.  After ``--warmup`` seconds (caches fill, pools reach their
size), each metric is fitted against the kill count by least squares and
reported as growth per 1,000 kills: for every process that lived through
the whole window, and for the whole tree.  Targets: fds and threads +0 per
1,000 kills (a bounded cache fills during the warm-up), RSS under 5 MB per
1,000 kills in every process.  Results: the table on stdout,
``bench/results/soak.json`` (rows), ``bench/results/soak-series.json``
(every sample), each demo's output in ``bench/results/soak-<scenario>.log``
and ``bench/results/soak.png`` when matplotlib is installed;
progress on stderr.  Exit status 1 when a demo run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from _common import Progress, environment, results_dir, write_json
from _soakfit import LIMITS, growth_rows, net_of_baseline

from actors.tools.census import census_tree

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SCENARIOS: dict[str, list[str]] = {"main": [], "cluster": ["--nodes", "3"]}
#: What the demo process is, per scenario; below a node (the demo, or an
#: ``actors node`` process of the cluster) come its zygote, then the hosts
#: the zygote forks, then whatever a host starts.
ROOT_ROLE = {"main": "node", "cluster": "controller"}
BELOW_NODE = ("zygote", "host", "helper")
_NODE_CMD = re.compile(r" -m actors node .*--name (\S+)")
_KILLS = re.compile(r"(?<!node )kills (\d+)")
_NODE_KILLS = re.compile(r"node kills (\d+)")
_ELAPSED = re.compile(r"^\s*(\d+(?:\.\d+)?)/\d+(?:\.\d+)? s")


class Run:
    """One demo process and its samples; the reader thread parses its output."""

    def __init__(self, scenario: str, duration: float, rate: float, seed: int, log_path: str) -> None:
        self.scenario = scenario
        self.name = scenario if rate > 0 else f"{scenario}-idle"
        self.rate = rate
        self.cmd = [
            sys.executable,
            "-m",
            "actors",
            "demo",
            "--duration",
            f"{duration:g}",
            "--kill-rate",
            f"{rate:g}",
            "--no-live",
            "--seed",
            str(seed),
            *SCENARIOS[scenario],
        ]
        self.duration = duration
        self.progress: list[tuple[float, int]] = []  # (seconds since start, kills so far)
        self.samples: list[dict[str, Any]] = []
        self.roles: dict[int, tuple[str, int]] = {}  # pid -> (role, depth below its node)
        self.tail: list[str] = []
        self.result = ""
        self.t0 = time.monotonic()
        env = dict(os.environ, PYTHONPATH=ROOT)
        self.proc = subprocess.Popen(
            self.cmd,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.log_path = log_path
        self.reader = threading.Thread(target=self._read, name=f"soak-read-{self.name}", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with open(self.log_path, "w", encoding="utf-8") as log:
            self._parse(self.proc.stdout, log)

    def _parse(self, lines: Any, log: Any) -> None:
        for line in lines:
            log.write(line)
            log.flush()
            now = time.monotonic() - self.t0
            self.tail = (self.tail + [line.rstrip()])[-40:]
            if line.startswith("RESULT"):
                self.result = line.strip()
            if _ELAPSED.match(line):
                kills = sum(int(m) for m in _KILLS.findall(line)) + sum(int(m) for m in _NODE_KILLS.findall(line))
                self.progress.append((now, kills))

    def _role(self, pid: int, ppid: int) -> str:
        """``node``/``controller``, ``node n2``, ``zygote``, ``host`` or ``helper``: by
        the command line of a node process, and by depth below its node for the rest."""
        known = self.roles.get(pid)
        if known is None:
            if pid == self.proc.pid:
                known = (ROOT_ROLE[self.scenario], 0)
            else:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    cmdline = ""
                node = _NODE_CMD.search(cmdline)
                if node and ppid == self.proc.pid:  # a node's hosts inherit its command line
                    known = (f"node {node.group(1)}", 0)
                else:
                    below = self.roles.get(ppid, ("?", len(BELOW_NODE)))[1] + 1
                    known = (BELOW_NODE[min(below, len(BELOW_NODE)) - 1], below)
            self.roles[pid] = known
        return known[0]

    def sample(self) -> None:
        procs = {}
        for depth, snap in census_tree(self.proc.pid, exclude=frozenset({os.getpid()})):
            procs[str(snap.pid)] = {
                "depth": depth,
                "role": self._role(snap.pid, snap.ppid),
                "rss_kb": snap.rss_kb,
                "threads": snap.threads,
                "fds": dict(snap.fds),
                "files": dict(snap.files),
            }
        if procs:
            self.samples.append({"t": round(time.monotonic() - self.t0, 2), "procs": procs})

    @property
    def kills(self) -> int:
        return self.progress[-1][1] if self.progress else 0

    def stop(self, timeout: float) -> int:
        """Wait for the demo to end by itself (its grace period and checks), then make sure it did."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # our own session: the demo and nothing else
            return self.proc.wait(timeout=30)
        finally:
            self.reader.join(timeout=10)


def soak(
    names: list[str],
    duration: float,
    rate: float,
    interval: float,
    seed: int,
    parallel: bool,
    baseline: bool,
    stem: str,
) -> list[Run]:
    """Run the scenarios (one after another, or at once with ``parallel``), sampling
    as they go; with ``baseline``, each also without kills."""
    plan = [(n, r) for n in names for r in ((rate, 0.0) if baseline else (rate,))]
    batches = [plan] if parallel else [[p] for p in plan]
    runs: list[Run] = []
    ticks = max(1, int(duration / interval))
    bar = Progress(ticks * len(batches), label="soak")
    for batch in batches:
        current = [
            Run(name, duration, r, seed, os.path.join(results_dir(), f"{stem}-{name}{'' if r > 0 else '-idle'}.log"))
            for name, r in batch
        ]
        runs.extend(current)
        stop = threading.Event()
        deadline = time.monotonic() + duration + 600  # the demo's own ending is bounded well below this
        steps = 0
        for _ in range(int((duration + 600) / interval) + 2):
            alive = [r for r in current if r.proc.poll() is None]
            if not alive or time.monotonic() > deadline:
                break
            for run in alive:
                run.sample()
            if steps < ticks:
                steps += 1
                bar.step(
                    " ".join(
                        f"{r.name}: {r.kills} kills, {len(r.samples[-1]['procs']) if r.samples else 0} procs"
                        for r in current
                    )
                )
            stop.wait(interval)
        for _ in range(steps, ticks):
            bar.step("")
        for run in current:
            code = run.stop(timeout=max(1.0, deadline - time.monotonic()))
            if code != 0:
                bar.note(f"{run.name}: exit {code}\n" + "\n".join(run.tail[-10:]))
    return runs


def _table(report: list[dict[str, Any]]) -> str:
    head = (
        f"{'scenario':<12} {'process':<22} {'kills':>6} {'RSS MB':>13} {'MB/min':>7} {'MB/1k':>7} "
        f"{'net/1k':>7} {'fds':>10} {'fds/1k':>7} {'thr':>7} {'thr/1k':>7} {'sock':>8} {'sock/1k':>7}  verdict"
    )
    lines = [head, "-" * len(head)]
    for scenario in report:
        for row in scenario["rows"]:
            g, s, e = row["per_1k_kills"], row["start"], row["end"]

            def num(key: str, table: dict[str, Any] = g) -> str:
                return "-" if table.get(key) is None else f"{table[key]:+.1f}"

            net = row.get("net_per_1k", {}).get("rss_mb")
            lines.append(
                f"{scenario['name']:<12} {row['name']:<22} {row['kills']:>6} "
                f"{s['rss_mb']:>5.0f}->{e['rss_mb']:<6.0f} {num('rss_mb', row['per_minute']):>7} "
                f"{num('rss_mb'):>7} {'-' if net is None else f'{net:+.1f}':>7} "
                f"{s['fds']:>4.0f}->{e['fds']:<4.0f} {num('fds'):>7} "
                f"{s['threads']:>3.0f}->{e['threads']:<3.0f} {num('threads'):>7} "
                f"{s['sockets']:>3.0f}->{e['sockets']:<3.0f} {num('sockets'):>7}  {row['verdict']}"
            )
        lines.append(
            f"{scenario['name']:<12} {scenario['result'] or 'no RESULT line (exit ' + str(scenario['exit']) + ')'}"
        )
    return "\n".join(lines)


def _plot(series: list[dict[str, Any]], report: list[dict[str, Any]], warmup: float, name: str) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    from _soakfit import kills_at

    metrics = (("rss_kb", "RSS (MB)", 1 / 1024), ("fds", "open fds", 1), ("threads", "threads", 1))
    fig, axes = plt.subplots(len(series), len(metrics), figsize=(15, 4 * len(series)), squeeze=False)
    for r, (recorded, scenario) in enumerate(zip(series, report)):
        progress = [tuple(p) for p in recorded["progress"]]
        idle = scenario["kill_rate"] == 0
        keep = [(row["pid"], row["name"]) for row in scenario["rows"] if row.get("pid")]
        for c, (key, title, scale) in enumerate(metrics):
            ax = axes[r][c]
            for pid, label in keep:
                xs, ys = [], []
                for s in recorded["samples"]:
                    proc = s["procs"].get(pid)
                    if proc is not None and s["t"] >= warmup:
                        xs.append(s["t"] / 60.0 if idle else kills_at(progress, s["t"]))
                        value = sum(proc["fds"].values()) if key == "fds" else proc[key]
                        ys.append(value * scale)
                ax.plot(xs, ys, label=label, linewidth=1)
            ax.set_title(f"{scenario['name']}: {title}")
            ax.set_xlabel("minutes" if idle else "kills")
            if c == 0 and keep:
                ax.legend(fontsize=6)
    fig.tight_layout()
    path = os.path.join(results_dir(), f"{name}.png")
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 s per scenario at 2 kills/s")
    ap.add_argument("--minutes", type=float, default=30.0, help="minutes per scenario (default 30)")
    ap.add_argument("--kill-rate", type=float, default=None, help="kills per second (default 1; 2 with --quick)")
    ap.add_argument("--interval", type=float, default=None, help="seconds between samples (default 10; 1 quick)")
    ap.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="seconds left out of the fit (default 60, or a quarter of a shorter run)",
    )
    ap.add_argument("--only", default="main,cluster", help="comma-separated scenarios (main, cluster)")
    ap.add_argument("--parallel", action="store_true", help="run the scenarios at the same time")
    ap.add_argument(
        "--baseline",
        action="store_true",
        help="also run each scenario without kills: RSS per 1,000 kills net of what time alone adds",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--name", default="soak", help="results file stem (default soak: bench/results/soak.json)")
    ap.add_argument(
        "--reanalyse",
        action="store_true",
        help="run nothing: the table again from the files of the run named --name (e.g. another --warmup)",
    )
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown or not names:
        ap.error(f"--only takes {', '.join(SCENARIOS)}; got {args.only!r}")
    duration = 20.0 if args.quick else args.minutes * 60.0
    rate = args.kill_rate if args.kill_rate is not None else (2.0 if args.quick else 1.0)
    interval = args.interval if args.interval is not None else (1.0 if args.quick else 10.0)
    warmup = args.warmup if args.warmup is not None else min(60.0, duration / 4)
    if duration <= 0 or rate <= 0 or interval <= 0:
        ap.error("--minutes, --kill-rate and --interval must be positive")
    if args.reanalyse:
        return _reanalyse(args.name, warmup)
    load_before = os.getloadavg()
    runs = soak(names, duration, rate, interval, args.seed, args.parallel, args.baseline, args.name)
    load_after = os.getloadavg()
    report = []
    for run in runs:
        report.append(
            {
                "name": run.name,
                "command": " ".join(["python", "-m", *run.cmd[2:]]),
                "log": run.log_path,
                "exit": run.proc.returncode,
                "result": run.result,
                "kills": run.kills,
                "seconds": duration,
                "kill_rate": run.rate,
            }
        )
    series = [{"name": r.name, "progress": r.progress, "samples": r.samples} for r in runs]
    _analyse(report, series, warmup)
    print(
        f"soak: {duration:g} s per scenario at {rate:g} kills/s, samples every {interval:g} s, "
        f"growth per 1,000 kills after a {warmup:g} s warm-up; limits per 1k kills: "
        f"fds/threads/sockets +{LIMITS['fds']:g}, RSS +{LIMITS['rss_mb']:g} MB; "
        f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after"
    )
    print(_table(report))
    data = {
        "environment": environment(),
        "quick": args.quick,
        "warmup_s": warmup,
        "interval_s": interval,
        "parallel": args.parallel,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "limits_per_1k_kills": LIMITS,
        "scenarios": report,
    }
    path = write_json(args.name, data)
    write_json(f"{args.name}-series", {"scenarios": series})
    png = _plot(series, report, warmup, args.name)
    print(f"wrote {path}" + (f" and {png}" if png else ""))
    return 0 if all(r.proc.returncode == 0 for r in runs) else 1


def _analyse(report: list[dict[str, Any]], series: list[dict[str, Any]], warmup: float) -> None:
    """Fill each scenario's ``rows`` from its samples; net of the no-kill run where there is one."""
    for scenario, recorded in zip(report, series):
        scenario["rows"] = growth_rows(recorded["samples"], [tuple(p) for p in recorded["progress"]], warmup)
        if scenario["kill_rate"] == 0:
            for row in scenario["rows"]:
                row["verdict"] = "baseline (no kills)"
    for scenario in report:
        idle = next((r for r in report if r["name"] == f"{scenario['name']}-idle"), None)
        if idle is not None and scenario["rows"]:
            window_min = max(1e-9, scenario["rows"][-1]["minutes"])
            net_of_baseline(scenario["rows"], idle["rows"], scenario["rows"][-1]["kills"] / window_min)


def _reanalyse(name: str, warmup: float) -> int:
    """The table again from a finished run's files (``--name``), with this ``--warmup``."""
    with open(os.path.join(results_dir(), f"{name}.json"), encoding="utf-8") as f:
        data = json.load(f)
    with open(os.path.join(results_dir(), f"{name}-series.json"), encoding="utf-8") as f:
        series = json.load(f)["scenarios"]
    _analyse(data["scenarios"], series, warmup)
    data["warmup_s"] = warmup
    print(
        f"soak (re-analysed): growth per 1,000 kills after a {warmup:g} s warm-up; "
        f"load average {data['loadavg_before'][0]:.1f} before, {data['loadavg_after'][0]:.1f} after"
    )
    print(_table(data["scenarios"]))
    write_json(name, data)
    png = _plot(series, data["scenarios"], warmup, name)
    print(f"wrote {os.path.join(results_dir(), name + '.json')}" + (f" and {png}" if png else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
