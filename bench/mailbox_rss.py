"""Bounded mailboxes under overload: memory of every process, and what was lost.

An actor casts as fast as it can for ``--seconds`` (10) at an actor that
handles ``--rate`` (1,000) casts a second, in another host process of the
node (``ipc``) or in a host process of another node (``tcp``: node b is a
separate OS process, the link CurveZMQ-encrypted).  For each overflow policy
(and the unbounded default, for comparison) it samples the resident memory
(VmRSS) of every process involved every 0.2 s and reports the peak, and it
checks the books: every cast sent was handled or dropped by the policy,
and nothing else was lost (``lost`` must be 0 for every bounded row).

Run ``python bench/mailbox_rss.py`` (about 2 minutes) or ``--quick``
(3 s of casts a row, ``ipc`` only).  Results: stdout (table),
``bench/results/mailbox_rss.json``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from _common import environment, write_json
from messaging import _NodeB  # node b in its own process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: node b's send_dropped before the current row (its counters outlive the rows).
b_before: dict[int, int] = {}
POLICIES = ["drop_newest", "drop_oldest", "reject", "block", "unbounded"]
PAYLOAD = "x" * 100


def _classes() -> tuple[type, type, type]:
    from actors import GenServer

    class Slow(GenServer):
        """Handles ``rate`` casts a second (paced by a deadline, not by the sender)."""

        def init(self, rate: float) -> None:
            self.period = 1.0 / rate
            self.next = 0.0
            self.handled = 0

        def handle_cast(self, request: Any) -> None:
            now = time.monotonic()
            self.next = max(self.next, now) + self.period
            pause = self.next - now
            if pause > 0:
                time.sleep(pause)  # the work of one message
            self.handled += 1

        def handle_call(self, request: Any, from_: Any) -> Any:
            return [self.handled, self._actor_cell.info()["dropped"]]

    class Blaster(GenServer):
        """Casts for ``seconds`` as fast as it can (its own handle_call)."""

        def handle_call(self, request: Any, from_: Any) -> Any:
            target, seconds, payload = request
            cast = target.cast
            deadline = time.monotonic() + seconds
            sent = 0
            for i in range(100_000_000):
                cast(payload, timeout=30.0)
                sent += 1
                if not i & 255 and time.monotonic() > deadline:
                    break
            return sent

    class Counters(GenServer):
        """The counters of the process it runs in (node b's own, for the books)."""

        def handle_call(self, request: Any, from_: Any) -> Any:
            return self._actor_cell.runtime.stats_snapshot().get("counters", {})

    return Slow, Blaster, Counters


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Sampler:
    """Peak VmRSS per named pid, sampled every ``every`` seconds on a thread."""

    def __init__(self, pids: dict[str, int], every: float = 0.2) -> None:
        self.pids = pids
        self.base = {name: rss_kb(pid) for name, pid in pids.items()}
        self.peak = dict(self.base)
        self._stop = threading.Event()
        self._every = every
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            for name, pid in self.pids.items():
                self.peak[name] = max(self.peak[name], rss_kb(pid))

    def stop(self) -> dict[str, dict[str, float]]:
        self._stop.set()
        self._thread.join(timeout=5)
        return {
            n: {
                "base_mb": self.base[n] / 1024,
                "peak_mb": self.peak[n] / 1024,
                "growth_mb": (self.peak[n] - self.base[n]) / 1024,
            }
            for n in self.pids
        }


def one_row(
    node: Any, policy: str, placement: str, seconds: float, rate: float, size: int, node_b_pid: int | None
) -> dict[str, Any]:
    Slow, Blaster, Counters = _classes()
    kw: dict[str, Any] = {} if policy == "unbounded" else {"mailbox": size, "overflow": policy}
    if placement == "tcp":
        slow = node.spawn(Slow, rate, node="b", host="own", **kw)
    else:
        slow = node.spawn(Slow, rate, host="own", **kw)
    blaster = node.spawn(Blaster, host="own")
    pids = {"node a": os.getpid(), "sender host": blaster.os_pid, "receiver host": slow.os_pid}
    if node_b_pid is not None:
        pids["node b"] = node_b_pid
    before = node.stats()["counters"].get("actors.transport.send_dropped", 0)
    sampler = Sampler(pids)
    t0 = time.monotonic()
    sent = blaster.call((slow, seconds, PAYLOAD), timeout=seconds + 120.0)
    blast_s = time.monotonic() - t0
    handled = dropped = 0
    settled = False
    if policy != "unbounded":
        # Until every cast is accounted for: at most the mailbox's worth is left.
        # A poll that finds the mailbox full is itself dropped (MailboxFull):
        # counted apart, so that ``dropped`` is casts only.
        from actors import MailboxFull

        refused = 0
        deadline = time.monotonic() + size / rate * 3 + 30.0
        while time.monotonic() < deadline:
            try:
                handled, dropped = slow.call("count", timeout=30.0)
            except MailboxFull:
                refused += 1
                time.sleep(0.2)
                continue
            dropped -= refused
            if handled + dropped >= sent:
                settled = True
                break
            time.sleep(0.2)  # a bench pacing its own polls
    mem = sampler.stop()
    counters = node.stats()["counters"]
    transport_dropped = counters.get("actors.transport.send_dropped", 0) - before
    transport_dropped += counters.get("actors.net.direct_dropped", 0)
    if placement == "tcp":
        probe = node.spawn(Counters, node="b")
        b = probe.call("counters", timeout=30.0)
        transport_dropped += b.get("actors.transport.send_dropped", 0) - b_before.get(id(node), 0)
        b_before[id(node)] = b.get("actors.transport.send_dropped", 0)
        node.kill(probe)
    node.kill(blaster)
    node.kill(slow)
    return {
        "placement": placement,
        "policy": policy,
        "mailbox": None if policy == "unbounded" else size,
        "seconds": round(blast_s, 2),
        "sent": sent,
        "send_rate": round(sent / blast_s),
        "handled": handled,
        "dropped": dropped,
        "settled": settled,
        "lost": None if policy == "unbounded" else sent - handled - dropped,
        "transport_dropped_note": "frames (of up to 64 casts) dropped by a full pipe, both nodes",
        "transport_dropped": transport_dropped,
        "memory": mem,
    }


def report(rows: list[dict[str, Any]]) -> str:
    out = [
        "| placement | policy | sent | sent/s | handled | dropped | lost | frames dropped by a full pipe "
        "| peak RSS MB (growth) per process |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        mem = ", ".join(f"{n} {m['peak_mb']:.0f} (+{m['growth_mb']:.0f})" for n, m in r["memory"].items())
        lost = "-" if r["lost"] is None else r["lost"]
        out.append(
            f"| {r['placement']} | {r['policy']} | {r['sent']} | {r['send_rate']} | {r['handled']} | "
            f"{r['dropped']} | {lost} | {r['transport_dropped']} | {mem} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--mailbox", type=int, default=1000)
    parser.add_argument("--policy", action="append", choices=POLICIES)
    parser.add_argument("--placement", action="append", choices=["ipc", "tcp"])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds = min(args.seconds, 3.0)
    policies = args.policy or POLICIES
    placements = args.placement or (["ipc"] if args.quick else ["ipc", "tcp"])
    from actors import Node

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mailbox-rss-") as tmp:
        key = os.path.join(tmp, "cluster.key")
        subprocess.run(
            [sys.executable, "-m", "actors", "keygen", key],
            check=True,
            timeout=60,
            capture_output=True,
            env=dict(os.environ, PYTHONPATH=ROOT),
        )
        node_b = _NodeB(key) if "tcp" in placements else None
        try:
            with Node(name="a", listen="tcp://127.0.0.1:0", cluster_key=key) as node:
                if node_b is not None:
                    node.connect(node_b.address)
                for placement in placements:
                    for policy in policies:
                        print(f"{placement} {policy} ...", file=sys.stderr, flush=True)
                        rows.append(
                            one_row(
                                node,
                                policy,
                                placement,
                                args.seconds,
                                args.rate,
                                args.mailbox,
                                node_b.proc.pid if placement == "tcp" and node_b else None,
                            )
                        )
        finally:
            if node_b is not None:
                node_b.close()
    print(
        f"{args.seconds:.0f} s of casts ({len(PAYLOAD)} B str) at an actor handling {args.rate:.0f}/s, "
        f"mailbox={args.mailbox}"
    )
    print(report(rows))
    write_json("mailbox_rss", {"env": environment(), "args": vars(args), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
