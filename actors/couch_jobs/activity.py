"""Re-enqueue jobs whose workers went quiet (the logic of ``couch_jobs_activity_monitor``).

A worker proves it is alive by `update`-ing its job; every accept and update
gives the job a fresh activity sequence, never reused.  The seed remembers
the type's activity versionstamp at one check and, one type timeout later,
re-enqueues the running jobs whose versionstamp is at or below it.  That
needs sequences that commit in order, which on PostgreSQL means one hot row
per type locked until every commit's fsync.  This monitor asks the same
question without the order: it remembers the running jobs and their
sequences at one check (``vs``: ``{job id: seq}``), and at the next check
re-enqueues those still running with the *same* sequence -- a job touched
by any commit in between carries a new, different one.  "Running at the
last check and untouched since" is exactly the seed's "versionstamp at or
below the remembered one", on every store.  Its old worker's lock is gone,
so that worker's next write gets `Halt`.

When the type's timeout changes the remembered jobs are dropped, so the
new timeout is waited out in full before anything is re-enqueued.
"""

from __future__ import annotations

import random

from actors.config import Config

from . import db, settings
from .model import JobType, encode_type
from .store import Store

__all__ = ["ActivityMonitorLogic", "MISSING_TIMEOUT_CHECK_MSEC"]

#: ``?MISSING_TIMEOUT_CHECK``: check period while the type has no timeout.
MISSING_TIMEOUT_CHECK_MSEC = 5000


class ActivityMonitorLogic:
    """One type's activity monitor; the actor only runs its timer.

    ``init()`` and ``handle_check()`` return the seconds until the next
    ``check_activity`` message; ``handle_check`` also returns the ids it
    re-enqueued.
    """

    def __init__(
        self,
        job_type: JobType,
        store: Store,
        *,
        config: Config | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.type = job_type
        self.type_key = encode_type(job_type)
        self.store = store
        self.config = config
        self.rng = rng if rng is not None else random.Random()
        # Running jobs and their sequences at the last check; None is the
        # seed's `not_found` (nothing recorded yet: the next check only records).
        self.vs: dict[str, int] | None = None
        self.timeout_msec: float = 0

    def init(self) -> float:
        return self.schedule_check()

    def handle_check(self) -> tuple[list[str], float]:
        re_enqueued = self.check_activity()
        return re_enqueued, self.schedule_check()

    def check_activity(self) -> list[str]:
        """Re-enqueue jobs idle since the previous check; remember the running jobs now."""
        with self.store.transaction(write=True) as tx:
            running = db.get_running_seqs(tx, self.type_key)
            re_enqueued: list[str] = []
            if self.vs is not None:
                idle = {i: s for i, s in running.items() if self.vs.get(i) == s}
                re_enqueued = db.re_enqueue_inactive(tx, self.type_key, idle)
        for job_id in re_enqueued:
            running.pop(job_id, None)
        self.vs = running
        return re_enqueued

    def schedule_check(self) -> float:
        """Seconds until the next check: the type's timeout plus jitter.

        Reads the timeout afresh; if it changed (or vanished) the remembered
        jobs are forgotten, exactly as the seed resets its versionstamp.
        """
        with self.store.transaction(write=False) as tx:
            timeout = tx.get_type_timeout(self.type_key)
        if timeout is None:
            self.vs = None
            self.timeout_msec = MISSING_TIMEOUT_CHECK_MSEC
        else:
            timeout_msec = timeout * 1000
            if timeout_msec != self.timeout_msec:
                self.vs = None
                self.timeout_msec = timeout_msec
        max_jitter = min(self.timeout_msec / 2, settings.activity_monitor_max_jitter_msec(self.config))
        wait_msec = self.timeout_msec + self.rng.randint(1, max(1, int(max_jitter)))
        return wait_msec / 1000.0
