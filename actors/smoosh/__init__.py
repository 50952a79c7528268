"""smoosh, CouchDB's compaction daemon: what to compact, when, a few at a time.

Layers (see docs/smoosh.md):

* `policy` — the priority queue, the priority rules, windows, keys (pure);
* `settings` — `[smoosh]` and `[smoosh.<channel>]` parsed into frozen values;
* `access`, `persist` — the staleness table and the queue checkpoints;
* `channel_state`, `server_state` — the `smoosh_channel` and `smoosh_server`
  logic as plain classes returning `effects` for their actors to carry out;
* `adapter` — the host's storage: `SmooshAdapter`, and `SQLiteAdapter` which
  VACUUMs SQLite files in worker processes;
* `server`, `channel`, `helpers`, `watcher` — the actors; `sup` — the
  supervision tree (`start_smoosh`); `api` — `enqueue`, `sync_enqueue`,
  `suspend`, `resume`, `flush`, `status`, `handle_db_event`.
"""

from actors.smoosh.access import AccessTable
from actors.smoosh.adapter import CompactionJob, SmooshAdapter, SQLiteAdapter, changed_dbs
from actors.smoosh.api import (
    channel_ref,
    enqueue,
    flush,
    handle_db_event,
    resume,
    server_ref,
    status,
    suspend,
    sync_enqueue,
)
from actors.smoosh.channel import SmooshChannel
from actors.smoosh.channel_state import ChannelState
from actors.smoosh.effects import (
    AdoptJob,
    CloseChannel,
    EnqueueLater,
    EnqueueToChannel,
    ResumeJob,
    StartChannel,
    StartJob,
    SuspendJob,
    WriteCheckpoint,
)
from actors.smoosh.helpers import AccessCleaner, EventListener
from actors.smoosh.policy import (
    INDEX_CLEANUP,
    PriorityQueue,
    get_priority,
    in_window,
    parse_time,
    quantize,
    utc_minutes,
    validate_key,
)
from actors.smoosh.server import SmooshServer
from actors.smoosh.server_state import ObjectInfo, ServerState, compute_priority, db_event_keys
from actors.smoosh.settings import ChannelSettings, ServerSettings, all_channels, channel_list
from actors.smoosh.sup import SmooshSup, start_smoosh
from actors.smoosh.watcher import DirWatcher
from actors.smoosh.worker_job import WorkerJob

__all__ = [
    "INDEX_CLEANUP",
    "AccessCleaner",
    "AccessTable",
    "AdoptJob",
    "ChannelSettings",
    "ChannelState",
    "CloseChannel",
    "CompactionJob",
    "DirWatcher",
    "EnqueueLater",
    "EnqueueToChannel",
    "EventListener",
    "ObjectInfo",
    "PriorityQueue",
    "ResumeJob",
    "SQLiteAdapter",
    "ServerSettings",
    "ServerState",
    "SmooshAdapter",
    "SmooshChannel",
    "SmooshServer",
    "SmooshSup",
    "StartChannel",
    "StartJob",
    "SuspendJob",
    "WorkerJob",
    "WriteCheckpoint",
    "all_channels",
    "changed_dbs",
    "channel_list",
    "channel_ref",
    "compute_priority",
    "db_event_keys",
    "enqueue",
    "flush",
    "get_priority",
    "handle_db_event",
    "in_window",
    "parse_time",
    "quantize",
    "resume",
    "server_ref",
    "start_smoosh",
    "status",
    "suspend",
    "sync_enqueue",
    "utc_minutes",
    "validate_key",
]
