"""The public surface of actors.replicator is pinned."""

import actors.replicator as replicator


def test_exported_names_exist_and_are_pinned():
    for name in replicator.__all__:
        assert hasattr(replicator, name), name
    assert {
        "SchedulerState",
        "StartJob",
        "StopJob",
        "Settings",
        "FairShare",
        "DocStore",
        "ReplicationJob",
        "SchedulerJob",
        "SeqTracker",
        "Job",
        "Rep",
        "reschedule",
        "pending_jobs",
        "backoff_micros",
        "consecutive_crashes",
        "latest_crash_timestamp",
        "last_started",
        "oldest_job_first",
    } <= set(replicator.__all__)


def test_actor_layer_names_are_exported():
    assert {
        "SchedulerServer",
        "SchedulerReader",
        "SchedulerJobServer",
        "ReplicationWorker",
        "SchedulerSup",
        "ReplicatorSup",
        "JobTable",
        "start_replicator",
        "start_job",
        "terminate_job",
        "SCHEDULER",
        "SCHEDULER_SUP",
        "READER",
        "REPLICATOR_SUP",
    } <= set(replicator.__all__)
    # the shared store and the leases
    assert {
        "PgDocStore",
        "open_db",
        "Fence",
        "Fenced",
        "StoreUnavailable",
        "LeaseConfig",
        "LeaseHolder",
        "LeaseTimes",
        "Run",
        "overlapping_runs",
        "read_runs",
    } <= set(replicator.__all__)
    from actors.replicator import scheduler

    for name in (
        "add_job",
        "remove_job",
        "reschedule",
        "jobs",
        "job",
        "job_summary",
        "find_jobs_by_dbname",
        "find_jobs_by_doc",
        "rep_state",
        "health_threshold",
        "subscribe",
    ):
        assert callable(getattr(scheduler, name)), name
