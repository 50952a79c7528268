"""`JobTable`, the reader's copy of the job table, and the scheduler's deltas."""

from __future__ import annotations

import pytest

from actors.replicator import JobTable, Rep, SchedulerState, Settings
from actors.stats import Stats

pytestmark = pytest.mark.timeout(10)


def rep(i, db="db/_replicator", doc=None):
    return Rep(id=f"j{i}", source=f"s{i}", target=f"t{i}", db_name=db, doc_id=doc)


def test_deltas_keep_the_copy_equal_to_the_scheduler_table():
    state = SchedulerState(Settings(max_jobs=2), Stats())
    table = JobTable()
    table.reset(state.track_changes(), 1)
    version = 1
    for i in range(5):
        state.add_job(rep(i, doc=f"d{i % 2}"), 100.0 + i)
    state.remove_job("j3", 110.0)
    changes = state.drain_changes()
    assert changes["j3"] is None
    version += 1
    table.apply(changes, version)
    assert {j.id for j in table.records()} == {j.id for j in state.all_jobs()}
    assert table.find_jobs_by_doc("db/_replicator", "d0") == ["j0", "j2", "j4"]
    assert table.find_jobs_by_dbname("other") == []
    assert table.rep_state("j1") == rep(1, doc="d1")
    assert table.job("j3") is None and table.job_summary("j3", 120) is None
    assert table.job("j0") == state.job("j0")
    assert table.job_summary("j4", 120) == state.job_summary("j4")
    assert state.drain_changes() == {}


def test_a_stale_delta_is_refused():
    table = JobTable()
    table.reset({}, 5)
    with pytest.raises(ValueError, match="stale delta"):
        table.apply({}, 5)


def test_drain_before_tracking_is_an_error():
    with pytest.raises(RuntimeError, match="track_changes"):
        SchedulerState(Settings(), Stats()).drain_changes()
