"""Kill actors and SIGKILL host processes at random, at a fixed rate.

The victims are the supervised workers of the given trees (the app and the
workload), found with `actors.app.chaos.tree_workers` before each kill.  Half of
the kills (when the victim lives in a host process, not in the host
program) are a SIGKILL of that whole OS process -- taking every actor in it
down at once, supervisors included -- and the others are ``node.kill`` of
the single actor (untrappable, ``terminate`` does not run).

A victim must have been running for ``min_age`` seconds (1 s): an actor
killed while its ``init``/``handle_continue`` is still starting children
leaves those children linked to a dead parent but never told (a kernel
limitation: Python cannot interrupt the running callback, and its later
``spawn_link`` succeeds), which would measure that bug rather than recovery.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import supervision as sv
from actors import ActorRef, CallTimeout, Exit, Node

from .base import Driver

__all__ = ["Killer"]


class Killer(Driver):
    name = "killer"

    def __init__(
        self,
        node: Node,
        trees: list[ActorRef] | Callable[[], list[ActorRef]],
        rate: float,
        *,
        sigkill_share: float = 0.5,
        min_age: float = 1.0,
        seed: int | None = None,
        may_sigkill: Callable[[int], bool] | None = None,
    ) -> None:
        if rate < 0:
            raise ValueError(f"kill rate must be >= 0, got {rate}")
        super().__init__(1.0 / rate if rate > 0 else 3600.0)
        self.node = node
        self.trees = trees
        #: Whether the OS process ``pid`` may be SIGKILLed (default: any host, never the host program).
        self.may_sigkill = may_sigkill or (lambda pid: pid != os.getpid())
        self.rate = rate
        self.sigkill_share = sigkill_share
        self.min_age = min_age
        self._first_seen: dict[str, float] = {}
        self.rng = random.Random(seed)
        self.kinds: Counter = Counter()
        self.victims: Counter = Counter()
        self.log: list[str] = []

    def _run(self, index: int) -> None:
        if self.rate <= 0:
            return
        # First kill after one interval, not at once: let the load start.
        if self.stop_flag.wait(self.period):
            return
        super()._run(index)

    def tick(self, index: int) -> None:
        workers: list[tuple[str, ActorRef]] = []
        for top in self.trees() if callable(self.trees) else self.trees:
            workers.extend(supervised_workers(top))
        now = time.monotonic()
        for _cid, ref in workers:
            self._first_seen.setdefault(ref.id, now)
        workers = [(cid, ref) for cid, ref in workers if now - self._first_seen[ref.id] >= self.min_age]
        if not workers:
            return
        child_id, victim = self.rng.choice(workers)
        label = victim.name or child_id
        if victim.node_id != self.node.id:
            label = f"{label}@{victim.node_id.split('@')[0]}"
        if self.may_sigkill(victim.os_pid) and self.rng.random() < self.sigkill_share:
            try:
                os.kill(victim.os_pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            kind = "SIGKILL host"
            text = f"SIGKILL pid {victim.os_pid} (host of {label})"
        else:
            self.node.kill(victim)
            kind = "kill actor"
            text = f"kill {label}"
        with self.lock:
            self.kinds[kind] += 1
            self.victims[_family(str(label).split("@")[0])] += 1
            self.log.append(text)

    def summary(self) -> str:
        with self.lock:
            total = sum(self.kinds.values())
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.kinds.items())) or "none"
            top = ", ".join(f"{k} {v}" for k, v in self.victims.most_common(8))
        return f"chaos: {total} kills ({kinds}); victims: {top or 'none'}"

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"kills": sum(self.kinds.values()), "last": self.log[-1] if self.log else ""}


def supervised_workers(top: ActorRef, timeout: float = 2.0, limit: int = 10_000) -> list[tuple[str, ActorRef]]:
    """``(child id, ref)`` of every running worker under ``top`` (bounded walk)."""
    out: list[tuple[str, ActorRef]] = []
    frontier: list[tuple[ActorRef, str]] = [(top, str(top.name or top.id))]
    for _ in range(limit):
        if not frontier:
            break
        current, sup_label = frontier.pop()
        try:
            rows = sv.which_children(current, timeout=timeout)
        except (Exit, CallTimeout):
            continue
        for row in rows:
            if isinstance(row.child, ActorRef):
                if row.type == "supervisor":
                    frontier.append((row.child, str(row.id)))
                else:
                    label = row.id if row.id is not None else f"child of {sup_label}"
                    out.append((str(label), row.child))
    return out


def _family(label: str) -> str:
    """``job_worker_3`` -> ``job_worker``; ``ioq_server_2`` -> ``ioq_server``: kills grouped by kind."""
    head, _, tail = label.rpartition("_")
    return head if head and tail.isdigit() else label
