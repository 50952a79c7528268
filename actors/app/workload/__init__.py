"""The demo's workload: drivers that exercise every service of the app and account for the outcome.

Each driver runs bounded loops on threads of the host program (or actors
under `WorkloadSup`), exposes ``snapshot()`` for the live view, and
``settle(deadline)`` / ``check()`` for the end-of-run verification:

* `DbWriter` (`smoosh_writes`) -- SQLite databases with inserted and deleted
  rows, announced with ``handle_db_event``; every compaction accounted for;
* `IoqReaders` (`ioq_reads`) -- ``pread`` through IOQ on real files, every
  byte verified, every failure an exit reason, no hang;
* `Replications` (`replication`) -- continuous replications rotating
  through the scheduler while their sources grow; every document present;
* `JobsDriver` (`jobs`) -- couch_jobs workers in several host processes;
  every job finished exactly once;
* `Killer` (`killer`) -- actors killed and host processes SIGKILLed at random.
"""

from .base import Check, Driver
from .ioq_reads import IoqReaders
from .jobs import JobsDriver, JobWorker
from .killer import Killer
from .replication import Replications
from .smoosh_writes import DbWriter, SmooshObserver
from .sup import WORKLOAD_SUP, WorkloadSup, start_workload

__all__ = [
    "WORKLOAD_SUP",
    "Check",
    "DbWriter",
    "Driver",
    "IoqReaders",
    "JobWorker",
    "JobsDriver",
    "Killer",
    "Replications",
    "SmooshObserver",
    "WorkloadSup",
    "start_workload",
]
