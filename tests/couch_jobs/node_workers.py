"""A couch_jobs worker for the multi-node test that holds its job *alive*:
it reports progress every `KEEP_EVERY` seconds, so the activity monitor
never takes the job back while the worker runs (it tells the collector
``("kept", no, n)`` after each update).  Only the death of its
node frees the job (its lock times out once the updates stop)."""

from __future__ import annotations

import os
from typing import Any

from tests.couch_jobs.actor_workers import Worker

KEEP_EVERY = 0.2  # well inside the test's 1 s type timeout


class KeepingHolder(Worker):
    def handle_cast(self, request: Any) -> None:
        if request[0] != "accept_and_keep":
            super().handle_cast(request)
            return
        _, collector = request
        job, _ = self.jobs.accept(self.type, timeout=30)
        self.job = self.jobs.update(None, job, {"kept": 0})
        self.kept = 0
        self.collector = collector
        collector.send(("held", self.no, self.job, os.getpid()))
        self.send_after(KEEP_EVERY, "keep")

    def handle_info(self, message: Any) -> None:
        if message == "keep":
            self.kept += 1
            self.job = self.jobs.update(None, self.job, {"kept": self.kept})
            self.collector.send(("kept", self.no, self.kept))
            self.send_after(KEEP_EVERY, "keep")
