"""Scale: how many actors a host holds, and how fast they are made and talk.

Run ``python bench/scale.py`` (a few minutes) or ``--quick`` (about 40 s).

Every row runs in one host process (``host="own"``), driven by an actor
living there, so what is measured is the host's scheduler and nothing of the
node.  Each row is measured twice in the same run: actors on the host's
scheduler (the default) and the baseline, the same actors each on a thread of
its own (``thread="own"``, what every actor was before the scheduler).  The
baseline runs at a smaller count where a thread each would take too long or
too much memory; per-actor figures are comparable.

* ``idle``: RSS per idle actor (the host's resident set before and after
  spawning N, divided by N), and spawns per second from inside the host;
* ``spawn_many``: actors per second started with ``Node.spawn_many`` from
  the program into a new host (one round trip);
* ``fanout``: one cast to each of N actors, each answering with one cast:
  messages per second (both ways counted);
* ``pingpong``: P pairs of actors bouncing a message M times: messages per
  second over all pairs;
* ``skynet``: a tree of actors, each spawning ten until the leaves, which
  send their number up; each parent sums and sends on (the classic
  benchmark; 1,000,000 leaves in a full run).

Published anchors (their authors' machines, for scale only): the BEAM's
process is 327 words (2.6 KB) and spawns ~300,000/s; skynet of 1,000,000
takes Go ~1 s, Proto.Actor ~0.5-1.5 s, Akka ~34 s.  Targets here: 100,000
idle actors at <= 2.6 KB each, >= 50,000 spawns/s inside a host, >= 200,000
msgs/s fan-out, skynet of 1,000,000 in <= 20 s on one core.  Results go to
stdout (table), ``bench/results/scale.json`` and stderr (progress).
"""

from __future__ import annotations

import argparse
import gc
import os
import threading
import time
from typing import Any

from _common import Progress, environment, median, write_json

from actors import ActorRef, Continue, From, GenServer, Node, Stop

TARGETS = {"rss_bytes_per_actor": 2600, "spawns_per_s": 50_000, "fanout_msgs_per_s": 200_000, "skynet_1m_s": 20.0}
ANCHORS = {
    "beam_bytes_per_process": 2600,
    "beam_spawns_per_s": 300_000,
    "skynet_1m_s": {"go": 1.0, "proto.actor": "0.5-1.5", "akka": 34.0},
}


def _rss() -> int:
    gc.collect()
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Idle(GenServer):
    """Waits; answers a cast from the driver with a cast back."""

    def init(self, driver: ActorRef | None = None) -> None:
        self.driver = driver

    def handle_cast(self, message: Any) -> None:
        assert self.driver is not None
        self.driver.cast(message)

    def handle_call(self, request: Any, from_: From) -> Any:
        return request


class Player(GenServer):
    """One side of a ping-pong pair: sends the ball back until it is worn out."""

    def init(self, driver: ActorRef) -> None:
        self.driver = driver
        self.other: ActorRef | None = None

    def handle_cast(self, message: Any) -> None:
        if message[0] == "other":
            self.other = message[1]
            return
        left = message[1]
        if left == 0:
            self.driver.cast(("done",))
            return
        assert self.other is not None
        self.other.cast(("ball", left - 1))


class Skynet(GenServer):
    """A node of the skynet tree: spawns ten below it, or is a leaf."""

    def init(self, parent: ActorRef, num: int, size: int, thread: str | None) -> Any:
        self.up, self.num, self.size, self.thread = parent, num, size, thread
        self.total = 0
        self.waiting = 0
        return Continue("go")

    def handle_continue(self, _arg: Any) -> Any:
        if self.size == 1:
            self.up.cast(self.num)
            return Stop("normal")
        step = self.size // 10
        self.waiting = 10
        for i in range(10):
            self.spawn(Skynet, self.ref, self.num + i * step, step, self.thread, thread=self.thread)
        return None

    def handle_cast(self, value: int) -> Any:
        self.total += value
        self.waiting -= 1
        if self.waiting == 0:
            self.up.cast(self.total)
            return Stop("normal")
        return None


class Count:
    """What the row waits for, shared by the driver and its `Tally` (both in
    the host: an actor spawned in its own process takes its arguments as they are)."""

    def __init__(self) -> None:
        self.got = 0
        self.expect = 0
        self.result: Any = None
        self.done = threading.Event()

    def reset(self, expect: int) -> None:
        self.got, self.expect, self.result = 0, expect, None
        self.done.clear()

    def wait(self, timeout: float) -> None:
        if not self.done.wait(timeout):
            raise TimeoutError(f"only {self.got} of {self.expect} answers in {timeout} s")


class Tally(GenServer):
    """Receives the row's answers while the driver's handler waits for them."""

    def init(self, count: Count) -> None:
        self.count = count

    def handle_cast(self, message: Any) -> None:
        count = self.count
        count.result = message
        count.got += 1
        if count.got >= count.expect:
            count.done.set()


class Driver(GenServer):
    """Lives in the measured host and runs each row there."""

    def init(self) -> None:
        self.count = Count()
        self.tally = self.spawn(Tally, self.count)

    def handle_call(self, request: Any, from_: From) -> Any:
        op = request[0]
        count, tally = self.count, self.tally
        if op == "idle":
            _, n, thread = request
            before = _rss()
            started = time.perf_counter()
            refs = [self.spawn(Idle, thread=thread) for _ in range(n)]
            took = time.perf_counter() - started
            per_actor = (_rss() - before) / n
            self._kill(refs)
            return {"n": n, "spawns_per_s": n / took, "rss_bytes_per_actor": per_actor}
        if op == "fanout":
            _, n, rounds, thread = request
            refs = [self.spawn(Idle, tally, thread=thread) for _ in range(n)]
            times = []
            for _ in range(rounds):
                count.reset(n)
                started = time.perf_counter()
                for ref in refs:
                    ref.cast("ping")
                count.wait(60)
                times.append(time.perf_counter() - started)
            self._kill(refs)
            return {"n": n, "msgs_per_s": 2 * n / median(times)}
        if op == "pingpong":
            _, pairs, hits, thread = request
            players, everyone = [], []
            for _ in range(pairs):
                a = self.spawn(Player, tally, thread=thread)
                b = self.spawn(Player, tally, thread=thread)
                a.cast(("other", b))
                b.cast(("other", a))
                players.append(a)
                everyone += [a, b]
            count.reset(pairs)
            started = time.perf_counter()
            for a in players:
                a.cast(("ball", hits))
            count.wait(120)
            took = time.perf_counter() - started
            self._kill(everyone)
            return {"pairs": pairs, "msgs_per_s": pairs * (hits + 1) / took}
        if op == "skynet":
            _, size, thread = request
            count.reset(1)
            started = time.perf_counter()
            self.spawn(Skynet, tally, 0, size, thread, thread=thread)
            count.wait(600)
            took = time.perf_counter() - started
            expected = size * (size - 1) // 2
            return {"size": size, "seconds": took, "sum_ok": count.result == expected}
        raise ValueError(request)

    def _kill(self, refs: list[ActorRef]) -> None:
        """The row's actors go before the next row (its host stays for the driver's next call)."""
        for ref in refs:
            self.exit(ref, "kill")


def _driver_in_host(node: Node) -> ActorRef:
    ref = node.spawn(Driver, host="own")
    assert ref is not None
    return ref


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts, fewer repeats")
    parser.add_argument("--reps", type=int, default=None, help="repeats per row (median quoted)")
    args = parser.parse_args(argv)
    quick = args.quick
    reps = args.reps or (1 if quick else 3)
    n_idle = 20_000 if quick else 100_000
    n_own = 1_000 if quick else 2_000
    n_fan = 2_000
    skynet = 10_000 if quick else 1_000_000
    rows: list[tuple[str, str, dict[str, Any]]] = []
    plan = [
        ("idle", "pool", ("idle", n_idle, None)),
        ("idle", "thread", ("idle", n_own, "own")),
        ("fanout", "pool", ("fanout", n_fan, 5, None)),
        ("fanout", "thread", ("fanout", n_fan, 5, "own")),
        ("pingpong", "pool", ("pingpong", 100, 200 if quick else 1_000, None)),
        ("pingpong", "thread", ("pingpong", 100, 200 if quick else 1_000, "own")),
        ("skynet", "pool", ("skynet", skynet, None)),
        ("skynet", "thread", ("skynet", 1_000 if quick else 10_000, "own")),
    ]
    progress = Progress(len(plan) * reps + reps, "scale")
    with Node() as node:
        for row, how, request in plan:
            samples = []
            for _ in range(reps):
                driver = _driver_in_host(node)  # a host of its own each time
                samples.append(driver.call(request, timeout=900))
                node.kill(driver)
                progress.step(f"{row} {how}")
            keys = [k for k, v in samples[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
            merged = {k: median(s[k] for s in samples) for k in keys}
            merged.update({k: v for k, v in samples[0].items() if k not in merged})
            rows.append((row, how, merged))
        many = []
        for _ in range(reps):
            started = time.perf_counter()
            refs = node.spawn_many(Idle, [() for _ in range(n_idle)], host="own")
            many.append(len(refs) / (time.perf_counter() - started))
            for ref in refs[:1]:
                node.kill(ref)  # the host goes when the node closes; one kill checks it answers signals
            progress.step("spawn_many")
        rows.append(("spawn_many", "pool", {"n": n_idle, "spawns_per_s": median(many)}))
    _print(rows)
    results = {
        "environment": environment(),
        "quick": quick,
        "rows": [{"row": r, "how": h, **fig} for r, h, fig in rows],
        "targets": TARGETS,
        "anchors": ANCHORS,
    }
    print(f"written to {write_json('scale', results)}")
    return 0


def _print(rows: list[tuple[str, str, dict[str, Any]]]) -> None:
    by = {(r, h): fig for r, h, fig in rows}
    print(f"{'row':<12}{'on the scheduler':>26}{'a thread each':>26}{'ratio':>9}")

    def line(row: str, key: str, unit: str, lower_better: bool = False) -> None:
        pool, own = by.get((row, "pool"), {}), by.get((row, "thread"), {})
        a, b = pool.get(key), own.get(key)
        ratio = "" if not a or not b else f"{(b / a if lower_better else a / b):8.1f}x"
        fa = f"{a:,.0f} {unit}" if a is not None else "-"
        fb = f"{b:,.0f} {unit}" if b is not None else "-"
        print(f"{row:<12}{fa:>26}{fb:>26}{ratio:>9}")

    line("idle", "rss_bytes_per_actor", "B/actor", lower_better=True)
    line("idle", "spawns_per_s", "spawns/s")
    line("spawn_many", "spawns_per_s", "spawns/s")
    line("fanout", "msgs_per_s", "msgs/s")
    line("pingpong", "msgs_per_s", "msgs/s")
    pool, own = by.get(("skynet", "pool"), {}), by.get(("skynet", "thread"), {})
    print(
        f"{'skynet':<12}{pool.get('seconds', 0):>20.2f} s ({pool.get('size', 0):,})"
        f"{own.get('seconds', 0):>14.2f} s ({own.get('size', 0):,})"
    )
    print(f"(ratios: scheduler over a thread each; for RSS, a thread each over the scheduler; targets {TARGETS})")


if __name__ == "__main__":
    raise SystemExit(main())
