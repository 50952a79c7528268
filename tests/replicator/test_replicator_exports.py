"""The public surface of actors.replicator is pinned."""

import actors.replicator as replicator


def test_exported_names_exist_and_are_pinned():
    for name in replicator.__all__:
        assert hasattr(replicator, name), name
    assert {
        "SchedulerState", "StartJob", "StopJob", "Settings", "FairShare", "DocStore", "ReplicationJob",
        "SchedulerJob", "SeqTracker", "Job", "Rep", "reschedule", "pending_jobs", "backoff_micros",
        "consecutive_crashes", "latest_crash_timestamp", "last_started", "oldest_job_first",
    } <= set(replicator.__all__)
