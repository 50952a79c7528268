"""``python -m actors bench``: every harness in ``bench/``, per core count.

Each harness is run as its own program, restricted to the first *k* CPUs
with ``sched_setaffinity`` (inherited by every process it starts), and writes
``<name>.json`` into the output folder (``bench/results``, or
``bench/results/quick`` for a ``--quick`` run: a quick look never overwrites
the figures of a full run).  This runner collects those files into one
JSON document keyed by harness and core count, flattens their numeric leaves
into metrics, and plots throughput-like and latency-like metrics against the
core count (PNG, when matplotlib is installed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["BenchError", "discover", "find_root", "flatten", "run_benches"]

_THROUGHPUT_HINTS = ("per_s", "per_sec", "rps", "throughput", "msgs_s", "jobs_s", "ops_s")
_LATENCY_HINTS = ("p50", "p99", "latency", "_ms", "_us")


def discover(bench_dir: Path) -> list[Path]:
    return sorted(p for p in bench_dir.glob("*.py") if not p.name.startswith("_"))


def flatten(data: Any, prefix: str = "") -> dict[str, float]:
    """Numeric leaves of a JSON document as ``a.b.c -> value``."""
    out: dict[str, float] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}{key}."))
    elif isinstance(data, list):
        for index, value in enumerate(data[:64]):
            label = value.get("name") if isinstance(value, dict) and isinstance(value.get("name"), str) else index
            out.update(flatten(value, f"{prefix}{label}."))
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        out[prefix.rstrip(".")] = float(data)
    return out


def _progress(done: int, total: int, label: str) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label:<40}", end="", file=sys.stderr, flush=True)


class BenchError(Exception):
    """The bench cannot run as asked (wrong folder, unknown harness, bad core list); says why."""


def find_root(cwd: Path) -> Path:
    """The repository root holding ``bench/``: the current folder, or `BenchError` saying where to go."""
    if (cwd / "bench").is_dir() and any(discover(cwd / "bench")):
        return cwd
    source = Path(__file__).resolve().parents[2]  # actors/tools/benchrun.py -> the checkout
    if (source / "bench").is_dir():
        raise BenchError(f"no bench/ folder in {cwd}: run it from the repository root, e.g. cd {source} && otpy bench")
    raise BenchError(
        f"no bench/ folder in {cwd}: the harnesses live in a source checkout of otpy; "
        f"run 'otpy bench' from the root of that checkout"
    )


def run_benches(args: Any, root: Path | None = None) -> int:
    """Run the harnesses; print each one's table (its stdout) as it finishes."""
    root = find_root(Path.cwd()) if root is None else root
    bench_dir = root / "bench"
    harnesses = discover(bench_dir)
    if args.only:
        wanted = set(args.only.split(","))
        harnesses = [h for h in harnesses if h.stem in wanted]
        missing = wanted - {h.stem for h in harnesses}
        if missing:
            raise BenchError(
                f"--only: no harness named {', '.join(sorted(missing))} in {bench_dir} "
                f"(there are: {', '.join(h.stem for h in discover(bench_dir))})"
            )
    available = sorted(os.sched_getaffinity(0))
    if args.cores:
        try:
            counts = sorted({int(c) for c in args.cores.split(",")})
        except ValueError:
            raise BenchError(f"--cores takes numbers like 1,2 (got {args.cores!r})") from None
        bad = [c for c in counts if c < 1 or c > len(available)]
        if bad:
            raise BenchError(f"--cores: {bad} not in 1..{len(available)}")
    else:
        counts = list(range(1, len(available) + 1))
    out_dir = root / (args.out or ("bench/results/quick" if args.quick else "bench/results"))
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"cores_available": len(available), "quick": bool(args.quick), "harnesses": {}}
    total = len(harnesses) * len(counts)
    done = 0
    failures = []
    for harness in harnesses:
        per_core: dict[str, Any] = {}
        for count in counts:
            cpus = set(available[:count])
            _progress(done, total, f"{harness.stem} on {count} core(s)")
            cmd = [sys.executable, str(harness)] + (["--quick"] if args.quick else [])
            t0 = time.monotonic()
            proc = subprocess.run(
                cmd,
                cwd=root,
                capture_output=True,
                text=True,
                preexec_fn=lambda c=cpus: os.sched_setaffinity(0, c),
                timeout=3600,
                env=dict(os.environ, PYTHONPATH=str(root), OTPY_BENCH_RESULTS=str(out_dir)),
            )
            elapsed = time.monotonic() - t0
            result_file = out_dir / f"{harness.stem}.json"
            entry: dict[str, Any] = {"returncode": proc.returncode, "seconds": round(elapsed, 1)}
            if proc.returncode != 0:
                failures.append(f"{harness.stem} on {count} core(s): exit {proc.returncode}")
                entry["stderr_tail"] = proc.stderr[-2000:]
            if result_file.exists():
                try:
                    data = json.loads(result_file.read_text())
                    entry["metrics"] = flatten(data)
                    (out_dir / f"{harness.stem}-cores{count}.json").write_text(json.dumps(data, indent=2))
                except ValueError:
                    failures.append(f"{harness.stem}: unreadable {result_file}")
            per_core[str(count)] = entry
            done += 1
            _show(harness.stem, count, proc, elapsed)
        results["harnesses"][harness.stem] = per_core
    _progress(done, total, "done")
    print(file=sys.stderr)
    summary_path = out_dir / "all.json"
    summary_path.write_text(json.dumps(results, indent=2))
    plots = _plot(results, out_dir)
    print(f"wrote {summary_path}" + (f" and {len(plots)} plots" if plots else " (no plots: matplotlib missing)"))
    for line in failures:
        print(f"FAILED {line}")
    return 1 if failures else 0


def _show(name: str, cores: int, proc: "subprocess.CompletedProcess[str]", elapsed: float) -> None:
    """One harness's table, printed as soon as it finished (its own stdout, unchanged)."""
    print(file=sys.stderr)
    status = "ok" if proc.returncode == 0 else f"FAILED, exit {proc.returncode}"
    print(f"== {name} on {cores} core(s): {status} in {elapsed:.0f} s ==")
    if proc.stdout.strip():
        print(proc.stdout.rstrip())
    if proc.returncode != 0 and proc.stderr.strip():
        print("\n".join(proc.stderr.rstrip().splitlines()[-10:]))
    print(flush=True)


def _plot(results: dict[str, Any], out_dir: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    for name, per_core in results["harnesses"].items():
        counts = sorted(int(c) for c in per_core)
        metrics: dict[str, list[tuple[int, float]]] = {}
        for c in counts:
            for key, value in per_core[str(c)].get("metrics", {}).items():
                metrics.setdefault(key, []).append((c, value))
        thr = {k: v for k, v in metrics.items() if any(h in k.lower() for h in _THROUGHPUT_HINTS)}
        lat = {k: v for k, v in metrics.items() if k not in thr and any(h in k.lower() for h in _LATENCY_HINTS)}
        if not thr and not lat:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(13, 5))
        for ax, group, title in ((axes[0], thr, "throughput"), (axes[1], lat, "latency")):
            for key, points in sorted(group.items())[:12]:
                xs, ys = zip(*points)
                ax.plot(xs, ys, marker="o", label=key[-50:])
            ax.set_title(f"{name}: {title}")
            ax.set_xlabel("cores")
            ax.set_xticks(counts)
            if group:
                ax.legend(fontsize=6)
        fig.tight_layout()
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written
