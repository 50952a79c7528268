"""``[replicator] cluster``: whether the replicator spreads its jobs over the nodes.

Off (the default) the replicator is what it always was: one scheduler, and
the host program adds jobs with `scheduler.add_job`.  On, the tree also runs
the clustering server and the doc processor (docs/replicator.md, "Across
nodes"), which read the replication documents of the ``_replicator`` file
``replicator_db`` every ``doc_poll_interval`` seconds and run, on each node,
the jobs it owns.  With ``[replicator] store = postgresql://...`` and no
``replicator_db``, the documents are the ``_replicator`` database of that
store (``replicator_db`` may also be such a URL).  ``cluster_quiet_period``/``cluster_start_period`` are in
`Settings` with the scheduler's other knobs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .settings import SECTION, InvalidSetting

__all__ = ["ClusterOptions"]


@dataclass(frozen=True)
class ClusterOptions:
    enabled: bool = False
    replicator_db: str | None = None
    doc_poll_interval: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise InvalidSetting("cluster", self.enabled, "not a boolean")
        if self.replicator_db is not None and (not isinstance(self.replicator_db, str) or not self.replicator_db):
            raise InvalidSetting("replicator_db", self.replicator_db, "must be a file path or a postgresql:// URL")
        if self.enabled and self.replicator_db is None:
            raise InvalidSetting(
                "replicator_db",
                None,
                "cluster = true needs the _replicator file every node reads (or [replicator] store, a PostgreSQL URL)",
            )
        poll = self.doc_poll_interval
        if isinstance(poll, bool) or not isinstance(poll, (int, float)) or not math.isfinite(poll) or poll <= 0:
            raise InvalidSetting("doc_poll_interval", poll, "must be a number of seconds > 0")

    @classmethod
    def from_config(cls, config: Any) -> "ClusterOptions":
        section = config.section(SECTION)
        raw_enabled = section.get("cluster", "false")
        text = str(raw_enabled).strip().lower()
        if text in ("true", "1", "yes", "on"):
            enabled = True
        elif text in ("false", "0", "no", "off"):
            enabled = False
        else:
            raise InvalidSetting("cluster", raw_enabled, "not a boolean")
        raw_poll = section.get("doc_poll_interval", "1.0")
        try:
            poll = float(raw_poll)
        except (TypeError, ValueError):
            raise InvalidSetting("doc_poll_interval", raw_poll, "not a number") from None
        db = section.get("replicator_db") or (section.get("store") or "").strip() or None
        return cls(enabled, db, poll)
