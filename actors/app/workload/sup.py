"""``demo_workload_sup``: the demo's own actors (IOQ file actors, couch_jobs workers).

It runs beside ``couch_sup``, not inside it: the application is the
product, the workload is what the demo does with it.  ``one_for_one`` with
a generous intensity, since the demo kills these children on purpose.
"""

from __future__ import annotations

from typing import Any

import supervision
from actors import ActorRef, Node
from supervision import ChildSpec, SupFlags

from .ioq_reads import file_specs
from .jobs import worker_specs

__all__ = ["WORKLOAD_SUP", "WorkloadSup", "start_workload"]

WORKLOAD_SUP = "demo_workload_sup"


class WorkloadSup(supervision.Supervisor):
    def init(self, children: list[ChildSpec]) -> tuple[SupFlags, list[ChildSpec]]:
        return SupFlags("one_for_one", intensity=100, period=10), children


def start_workload(node: Node, file_paths: list[str], workers: int, file_host: str = "demo_files") -> ActorRef:
    """Start the file actors (registered ``demo_file_<i>``) and ``workers`` job workers."""
    children: list[Any] = file_specs(file_paths, host=file_host) + worker_specs(workers)
    return node.spawn(WorkloadSup, children, name=WORKLOAD_SUP)
