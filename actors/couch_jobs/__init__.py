"""couch_jobs: durable background jobs on a transactional store (SQLite or PostgreSQL).

A port of Apache CouchDB's ``couch_jobs``.  Any process of a node adds jobs
of a type; workers in any process `accept` them, `update` progress, `finish`
or `resubmit` them; others `subscribe` to a job and `wait` for its changes.
A worker that stops updating loses its job to another worker after the
type's activity timeout (`ActivityMonitorLogic`) and gets `Halt` on its
next write.  See docs/couch_jobs.md.

The actor layer: ``start(node, path)`` runs the ``couch_jobs_sup`` tree
(server, activity monitors, notifiers, wake-up hub) in the node process;
every other process calls ``use(self)`` from an actor (``use(node)`` in the
host program) to attach its default instance to it.
"""

from .activity import ActivityMonitorLogic
from .activity_monitor import ActivityMonitor
from .agent import AgentSup, ProcessAgent
from .api import (
    CouchJobs,
    accept,
    add,
    clear_type_timeout,
    configure,
    counts,
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
from .app import start, stop
from .client import force_check_types, get_notifier_server
from .errors import (
    CouchJobsError,
    Halt,
    JsonEncodingError,
    NotFound,
    NoTypeTimeout,
    StoreClosed,
    StoreReadOnly,
    StoreUnavailable,
)
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
from .notifier import Notifier, TypeMonitor
from .process import use
from .server import JobsServer
from .store import JobRecord, Store, StoreTx
from .store_postgres import PostgresStore, PostgresTransaction
from .store_sqlite import SQLiteStore, SQLiteTransaction
from .stores import open_store
from .sup import ActivityMonitorSup, CouchJobsSup, NotifierSup
from .type_discovery import TypeDiscovery, diff_types
from .waker import ConditionWaker, Waker
from .wakeups import WakeupHub

__all__ = [
    "NOT_FOUND",
    "UNDEFINED_MAX_SCHEDULED_TIME",
    "ActivityMonitor",
    "ActivityMonitorLogic",
    "ActivityMonitorSup",
    "AgentSup",
    "ConditionWaker",
    "CouchJobs",
    "CouchJobsError",
    "CouchJobsSup",
    "Halt",
    "Job",
    "JobEvent",
    "JobRecord",
    "JobState",
    "JobType",
    "JobsServer",
    "JsonEncodingError",
    "NoTypeTimeout",
    "NotFound",
    "Notification",
    "Notifier",
    "NotifierLogic",
    "NotifierSup",
    "ProcessAgent",
    "SQLiteStore",
    "SQLiteTransaction",
    "StoreClosed",
    "StoreReadOnly",
    "StoreUnavailable",
    "PostgresStore",
    "PostgresTransaction",
    "Store",
    "StoreTx",
    "Subscription",
    "TypeDiscovery",
    "TypeMonitor",
    "TypeMonitorLogic",
    "Waker",
    "WakeupHub",
    "accept",
    "add",
    "clear_type_timeout",
    "configure",
    "counts",
    "decode_type",
    "default",
    "diff_types",
    "encode_type",
    "finish",
    "force_check_types",
    "get_job",
    "get_job_data",
    "get_job_state",
    "get_jobs",
    "get_notifier_server",
    "get_type_timeout",
    "is_resubmitted",
    "remove",
    "resubmit",
    "set_default",
    "set_type_timeout",
    "start",
    "stop",
    "open_store",
    "subscribe",
    "transaction",
    "unsubscribe",
    "update",
    "use",
    "wait",
]
