"""Where a replication resumes: comparing the checkpoint logs of source and target (pure).

The seed's ``compare_replication_logs/2``: the two ``_local`` checkpoint
documents agree on a session, or share one somewhere in their histories,
or the replication starts over from the lowest sequence.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["LOWEST_SEQ", "compare_replication_logs"]

log = logging.getLogger("actors.replicator.job")  # the replication job's logger, as before the move

#: The sequence a replication with no common history starts from.
LOWEST_SEQ = 0


def _has_session_id(session_id: Any, history: list[dict]) -> bool:
    return any(entry.get("session_id", None) == session_id for entry in history)


def _compare_rep_history(source: list[dict], target: list[dict]) -> tuple[Any, list[dict]]:
    # Iterative form of the seed's compare_rep_history/2 (bounded by the histories).
    while source and target:
        s, source_rest = source[0], source[1:]
        t, target_rest = target[0], target[1:]
        if _has_session_id(s.get("session_id"), target):
            log.info("found a common replication record with source_seq %r", s.get("recorded_seq"))
            return s.get("recorded_seq", LOWEST_SEQ), source_rest
        if _has_session_id(t.get("session_id"), source_rest):
            log.info("found a common replication record with source_seq %r", t.get("recorded_seq"))
            return t.get("recorded_seq", LOWEST_SEQ), target_rest
        source, target = source_rest, target_rest
    log.info("no common ancestry -- performing full replication")
    return LOWEST_SEQ, []


def compare_replication_logs(source_log: dict, target_log: dict) -> tuple[Any, list[dict]]:
    """Where to resume: ``(start sequence, history)`` from the two checkpoint bodies."""
    if source_log.get("session_id") == target_log.get("session_id"):
        return source_log.get("source_last_seq", LOWEST_SEQ), list(source_log.get("history", []))
    return _compare_rep_history(list(source_log.get("history", [])), list(target_log.get("history", [])))
