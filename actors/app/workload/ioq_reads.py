"""Reads through IOQ on real files, every answer checked byte for byte.

The files hold seeded random bytes; the driver keeps a copy, so each
``ioq.call(file, ("pread", pos, len), ("interactive", shard))`` is compared
with the expected slice.  Each file is a `FileServer` supervised by the
workload tree under a registered name (``demo_file_<i>``), so a killed file
actor comes back under the same name and readers look it up again.

Every call ends one of four ways: the right bytes; wrong bytes (never
acceptable); a failure carrying an exit reason (the file or the IOQ server
was killed mid-request: `IoTargetDown`, `actors.Exit`); or a hang
(`CallTimeout`, never acceptable -- IOQ must fail callers, not forget them).
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from typing import Any

from actors import ActorRef, CallTimeout, Exit, Node
from actors.ioq import FileServer, IoTargetDown, call
from supervision import ChildSpec

from .base import Check, Driver

__all__ = ["FILE_NAME", "IoqReaders", "file_specs", "make_files"]

FILE_NAME = "demo_file_{}"
SHARD = "shards/00000000-1fffffff/demo/reads{}"


def make_files(directory: str, count: int, size: int, seed: int | None) -> list[tuple[str, bytes]]:
    """``count`` files of ``size`` seeded random bytes; returns (path, contents)."""
    os.makedirs(directory, exist_ok=True)
    rng = random.Random(seed)
    files = []
    for i in range(count):
        data = rng.randbytes(size)
        path = os.path.join(directory, f"file{i}.bin")
        with open(path, "wb") as fh:
            fh.write(data)
        files.append((path, data))
    return files


def file_specs(paths: list[str], host: str = "demo_files") -> list[Any]:
    """Supervisor child specs: one `FileServer` per path, registered as ``demo_file_<i>``."""
    return [
        ChildSpec(FILE_NAME.format(i), (FileServer, (path, False)), host=host, name=FILE_NAME.format(i))
        for i, path in enumerate(paths)
    ]


class IoqReaders(Driver):
    name = "ioq-reader"

    def __init__(
        self,
        node: Node,
        files: list[tuple[str, bytes]],
        *,
        threads: int = 3,
        period: float = 0.002,
        max_len: int = 8192,
        call_timeout: float = 10.0,
        seed: int | None = None,
    ) -> None:
        super().__init__(period, threads)
        self.node = node
        self.files = files
        self.max_len = max_len
        self.call_timeout = call_timeout
        self.seed = seed
        self.ok = 0
        self.wrong = 0
        self.hung = 0
        self.failed: Counter = Counter()
        self.no_file = 0
        #: the reads that came back wrong or hung: what was asked, of which actor, how long it took
        self.bad: list[str] = []
        self._refs: dict[int, ActorRef | None] = {}
        self._rngs = [random.Random(None if seed is None else seed * 1000 + i) for i in range(threads)]

    def _ref(self, i: int) -> ActorRef | None:
        ref = self._refs.get(i)
        if ref is None:
            ref = self.node.whereis(FILE_NAME.format(i))
            self._refs[i] = ref
        return ref

    def tick(self, index: int) -> None:
        rng = self._rngs[index]
        i = rng.randrange(len(self.files))
        data = self.files[i][1]
        length = rng.randint(1, self.max_len)
        pos = rng.randrange(0, len(data) - length)
        ref = self._ref(i)
        if ref is None:
            with self.lock:
                self.no_file += 1
            self.stop_flag.wait(0.05)
            return
        began = time.monotonic()
        try:
            got = call(ref, ("pread", pos, length), ("interactive", SHARD.format(i)), timeout=self.call_timeout)
        except CallTimeout:
            outcome = "hung"
        except IoTargetDown as exc:
            outcome = f"file down: {_reason(exc)}"
            self._refs[i] = None
        except Exit as exc:
            outcome = f"ioq server: {_reason(exc)}"
        else:
            outcome = "ok" if bytes(got) == data[pos : pos + length] else "wrong"
        with self.lock:
            if outcome == "ok":
                self.ok += 1
            elif outcome == "wrong":
                self.wrong += 1
            elif outcome == "hung":
                self.hung += 1
            else:
                self.failed[outcome] += 1
            if outcome in ("wrong", "hung") and len(self.bad) < 50:
                self.bad.append(
                    f"{outcome}: file {i} ({ref}) pread {pos}+{length}, "
                    f"after {time.monotonic() - began:.1f} s (thread {index})"
                )
        if outcome not in ("ok", "wrong"):
            # the server or file is being restarted: give it a moment rather than failing in a tight loop
            self.stop_flag.wait(0.05)

    def check(self) -> Check:
        c = Check("ioq")
        failed = sum(self.failed.values())
        c.lines.append(
            f"ioq: {self.ok + self.wrong + failed + self.hung} reads through IOQ of {len(self.files)} "
            f"files: {self.ok} correct bytes, {self.wrong} wrong bytes, {failed} failed with an exit "
            f"reason, {self.hung} hung"
        )
        if self.failed:
            top = ", ".join(f"{k} x{v}" for k, v in self.failed.most_common(4))
            c.lines.append(f"  failures: {top}")
        if self.no_file:
            c.lines.append(f"  {self.no_file} reads waited for a file actor being restarted")
        c.lost = self.wrong + self.hung
        if self.bad:
            c.lines.append("  LOST (wrong or hung), one by one:")
            c.lines.extend("    " + line for line in self.bad)
        c.counted = f"{self.ok + self.wrong + self.hung} answered reads"
        c.failed = failed
        return c

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"ok": self.ok, "failed": sum(self.failed.values()), "wrong": self.wrong, "hung": self.hung}


def _reason(exc: Exception) -> str:
    reason = getattr(exc, "reason", exc)
    text = (
        reason
        if isinstance(reason, str)
        else type(reason).__name__
        if not isinstance(reason, tuple)
        else str(reason[0])
    )
    return str(text)[:40]
