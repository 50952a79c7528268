"""IOQ: per-core IO request prioritisation (IOQ2), with IOQ1 for comparison.

This package holds the pure policy (heap, priorities, dispatch), the state
of each seed gen_server as a plain class, the file IO target, the server
actors over those states, the ``ioq_sup`` tree and the `call` facade.
"""

from .api import (
    call,
    get_concurrency,
    get_disk_concurrency,
    get_disk_counters,
    get_disk_queues,
    get_osproc_queues,
    get_osproc_requests,
    set_concurrency,
    set_disk_concurrency,
)
from .dispatch import choose_server, current_cpu, fd_hash, route, server_name, server_names
from .file_server import FileServer, IoFailure
from .file_target import FileTarget, FileTargetError
from .hqueue import Empty, Full, HQueue, HQueueError, InvalidPriority
from .ioq_config import Ioq2Settings, read_settings
from .osq import OsqServer
from .osq_state import OsqRequest, OsqState, OsqSubmission
from .request import (
    BAD_MAGIC_NUM,
    Completion,
    IoqRequest,
    IoTargetDown,
    add_request_dimensions,
    get_queue_depths,
)
from .server1 import Ioq1Server
from .server1_state import Ioq1Request, Ioq1Settings, Ioq1State, sort_queues
from .server2 import Ioq2Server
from .server2_state import Ioq2State
from .sup import IoqSup, start_ioq

__all__ = [
    "BAD_MAGIC_NUM",
    "Completion",
    "Empty",
    "FileServer",
    "FileTarget",
    "FileTargetError",
    "Full",
    "HQueue",
    "HQueueError",
    "InvalidPriority",
    "IoFailure",
    "IoTargetDown",
    "Ioq1Request",
    "Ioq1Server",
    "Ioq1Settings",
    "Ioq1State",
    "Ioq2Server",
    "Ioq2Settings",
    "Ioq2State",
    "IoqRequest",
    "IoqSup",
    "OsqRequest",
    "OsqServer",
    "OsqState",
    "OsqSubmission",
    "add_request_dimensions",
    "call",
    "choose_server",
    "current_cpu",
    "fd_hash",
    "get_concurrency",
    "get_disk_concurrency",
    "get_disk_counters",
    "get_disk_queues",
    "get_osproc_queues",
    "get_osproc_requests",
    "get_queue_depths",
    "read_settings",
    "route",
    "server_name",
    "server_names",
    "set_concurrency",
    "set_disk_concurrency",
    "sort_queues",
    "start_ioq",
]
