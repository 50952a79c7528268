"""The replicator scheduler (``couch_replicator_scheduler``), ported.

Layers, one module each: `records` (job records), `policy` (pure decisions),
`fair_share` (per-owner shares), `settings` (``[replicator]`` knobs),
`scheduler_state` (the scheduler gen_server's logic as a plain class),
`docstore` (SQLite document stores) and `replication` (the replication job's
logic over two stores).  The actors: `scheduler` (``couch_replicator_scheduler``,
its reader and the API functions), `scheduler_job` (one job's process and its
workers), `scheduler_sup` (the job supervisor) and `sup` (the replicator tree);
`job_table` is the reader's copy of the job table.

The stores: `docs_model` (documents, changes, errors), `docstore_sql` (the
SQL, once, for both backends), `docstore` (SQLite files), `docstore_pg`
(PostgreSQL), `stores` (which one a name means).  Leases: `actors.leases`
(shared with sharding), opened on the replicator's store by `lease`.

Across nodes (``[replicator] cluster = true``): `clustering` (ownership and
stability, pure), `cluster_state` (members and their reports, pure),
`replicator_db` (the ``_replicator`` documents), `cluster_options`, and the
actors `clustering_server` (``couch_replicator_clustering``) and
`doc_processor` (``couch_replicator_doc_processor``).
"""

from actors.leases import Fence, LeaseTimes, Run, overlapping_runs

from .cluster_options import ClusterOptions
from .cluster_state import ClusterState, ClusterView, PeerReport
from .clustering_server import CLUSTERING, ClusteringServer
from .doc_processor import DOC_PROCESSOR, DocProcessor, cluster_status
from .docstore import Change, Conflict, DatabaseNotFound, Doc, DocStore, DocStoreError, Fenced, StoreUnavailable
from .docstore_pg import PgDocStore
from .fair_share import DEFAULT_SHARES, FairShare, owner_of
from .job_table import JobTable
from .lease import LeaseConfig, LeaseHolder, read_runs
from .policy import (
    Decision,
    Selector,
    backoff_micros,
    backoff_until,
    consecutive_crashes,
    is_continuous,
    last_started,
    latest_crash_timestamp,
    not_recently_crashed,
    oldest_job_first,
    pending_jobs,
    reschedule,
    sort_oldest_first,
    start_pending_jobs,
    update_history,
)
from .records import MAX_BACKOFF, STARTING, Job, Rep, crashed, is_crash
from .replication import (
    Batch,
    CheckpointError,
    ReplicationJob,
    SchedulerJob,
    SeqTracker,
    compare_replication_logs,
)
from .replicator_db import BadReplicationDoc, ReplicatorDb, delete_replication, put_replication, rep_from_doc
from .scheduler import READER, SCHEDULER, SchedulerReader, SchedulerServer
from .scheduler_job import ReplicationWorker, SchedulerJobServer
from .scheduler_state import Effect, SchedulerState, StartJob, StopJob, rep_error_to_text
from .scheduler_sup import (
    SCHEDULER_SUP,
    JobNotRunning,
    JobStartError,
    SchedulerSup,
    start_job,
    terminate_job,
)
from .settings import InvalidSetting, Settings
from .stores import open_db
from .sup import REPLICATOR_SUP, ReplicatorSup, start_replicator

__all__ = [
    "BadReplicationDoc",
    "Batch",
    "CLUSTERING",
    "Change",
    "CheckpointError",
    "ClusterOptions",
    "ClusterState",
    "ClusterView",
    "ClusteringServer",
    "Conflict",
    "DEFAULT_SHARES",
    "DOC_PROCESSOR",
    "DatabaseNotFound",
    "Decision",
    "Doc",
    "DocProcessor",
    "DocStore",
    "DocStoreError",
    "Effect",
    "FairShare",
    "InvalidSetting",
    "Job",
    "JobNotRunning",
    "JobStartError",
    "JobTable",
    "MAX_BACKOFF",
    "PeerReport",
    "READER",
    "REPLICATOR_SUP",
    "Rep",
    "ReplicationJob",
    "ReplicationWorker",
    "ReplicatorDb",
    "Fence",
    "Fenced",
    "LeaseConfig",
    "LeaseHolder",
    "LeaseTimes",
    "PgDocStore",
    "Run",
    "StoreUnavailable",
    "open_db",
    "overlapping_runs",
    "read_runs",
    "ReplicatorSup",
    "SCHEDULER",
    "SCHEDULER_SUP",
    "STARTING",
    "SchedulerJob",
    "SchedulerJobServer",
    "SchedulerReader",
    "SchedulerServer",
    "SchedulerState",
    "SchedulerSup",
    "Selector",
    "SeqTracker",
    "Settings",
    "StartJob",
    "StopJob",
    "backoff_micros",
    "backoff_until",
    "cluster_status",
    "compare_replication_logs",
    "consecutive_crashes",
    "crashed",
    "delete_replication",
    "is_continuous",
    "is_crash",
    "last_started",
    "latest_crash_timestamp",
    "not_recently_crashed",
    "oldest_job_first",
    "owner_of",
    "pending_jobs",
    "put_replication",
    "rep_error_to_text",
    "rep_from_doc",
    "reschedule",
    "sort_oldest_first",
    "start_job",
    "start_pending_jobs",
    "start_replicator",
    "terminate_job",
    "update_history",
]
