"""IOQ: per-core IO request prioritisation (IOQ2), with IOQ1 for comparison.

This package holds the pure policy (heap, priorities, dispatch), the state
of each seed gen_server as a plain class, and the file IO target.
"""

from .dispatch import choose_server, current_cpu, fd_hash, route, server_name, server_names
from .file_target import FileTarget, FileTargetError
from .hqueue import Empty, Full, HQueue, HQueueError, InvalidPriority
from .ioq_config import Ioq2Settings, read_settings
from .osq_state import OsqRequest, OsqState, OsqSubmission
from .request import (
    BAD_MAGIC_NUM,
    Completion,
    IoqRequest,
    IoTargetDown,
    add_request_dimensions,
    get_queue_depths,
)
from .server1_state import Ioq1Request, Ioq1Settings, Ioq1State, sort_queues
from .server2_state import Ioq2State

__all__ = [
    "BAD_MAGIC_NUM",
    "Completion",
    "Empty",
    "FileTarget",
    "FileTargetError",
    "Full",
    "HQueue",
    "HQueueError",
    "InvalidPriority",
    "IoTargetDown",
    "Ioq1Request",
    "Ioq1Settings",
    "Ioq1State",
    "Ioq2Settings",
    "Ioq2State",
    "IoqRequest",
    "OsqRequest",
    "OsqState",
    "OsqSubmission",
    "add_request_dimensions",
    "choose_server",
    "current_cpu",
    "fd_hash",
    "get_queue_depths",
    "read_settings",
    "route",
    "server_name",
    "server_names",
    "sort_queues",
]
