"""couch_jobs: durable background jobs on a transactional store (SQLite by default).

A port of Apache CouchDB's ``couch_jobs``.  Any process of a node adds jobs
of a type; workers in any process `accept` them, `update` progress, `finish`
or `resubmit` them; others `subscribe` to a job and `wait` for its changes.
A worker that stops updating loses its job to another worker after the
type's activity timeout (`ActivityMonitorLogic`) and gets `Halt` on its
next write.  See docs/couch_jobs.md.
"""

from .activity import ActivityMonitorLogic
from .api import (
    CouchJobs,
    accept,
    add,
    clear_type_timeout,
    configure,
    default,
    finish,
    get_job,
    get_job_data,
    get_job_state,
    get_jobs,
    get_type_timeout,
    is_resubmitted,
    remove,
    resubmit,
    set_default,
    set_type_timeout,
    subscribe,
    transaction,
    unsubscribe,
    update,
    wait,
)
from .errors import CouchJobsError, Halt, JsonEncodingError, NoTypeTimeout, NotFound
from .model import (
    UNDEFINED_MAX_SCHEDULED_TIME,
    Job,
    JobEvent,
    JobState,
    JobType,
    Subscription,
    decode_type,
    encode_type,
)
from .notifications import NOT_FOUND, Notification, NotifierLogic, TypeMonitorLogic
from .store import JobRecord, SQLiteStore, SQLiteTransaction, Store, StoreTx
from .type_discovery import TypeDiscovery, diff_types
from .waker import ConditionWaker, Waker

__all__ = [
    "NOT_FOUND",
    "UNDEFINED_MAX_SCHEDULED_TIME",
    "ActivityMonitorLogic",
    "ConditionWaker",
    "CouchJobs",
    "CouchJobsError",
    "Halt",
    "Job",
    "JobEvent",
    "JobRecord",
    "JobState",
    "JobType",
    "JsonEncodingError",
    "NoTypeTimeout",
    "NotFound",
    "Notification",
    "NotifierLogic",
    "SQLiteStore",
    "SQLiteTransaction",
    "Store",
    "StoreTx",
    "Subscription",
    "TypeDiscovery",
    "TypeMonitorLogic",
    "Waker",
    "accept",
    "add",
    "clear_type_timeout",
    "configure",
    "decode_type",
    "default",
    "diff_types",
    "encode_type",
    "finish",
    "get_job",
    "get_job_data",
    "get_job_state",
    "get_jobs",
    "get_type_timeout",
    "is_resubmitted",
    "remove",
    "resubmit",
    "set_default",
    "set_type_timeout",
    "subscribe",
    "transaction",
    "unsubscribe",
    "update",
    "wait",
]
