"""The whole node: IOQ, smoosh, the replicator and couch_jobs under one supervisor.

A host program starts the full application in three lines::

    from actors import Node
    from actors.app.couch import start_app

    node = Node(); app = start_app(node, "couch.ini")   # or no config: embedded defaults
    ...
    app.stop(); node.close()

The tree (``couch_sup``, ``one_for_one``) has one child per service, each
the service's own top supervisor, in start order::

    couch_sup                     one_for_one, [couch] intensity in [couch] period s
    ├── ioq_sup                   IOQ1 + os-process queue, one IOQ2 server per core (hosts ioq<i>, pinned)
    ├── couch_jobs_sup            SQLite at <state_dir>/couch_jobs.sqlite, in the node process
    ├── smoosh_sup                host process "smoosh"; SQLiteAdapter over <state_dir>/data
    └── couch_replicator_sup      scheduler, job supervisor; one host process per running job

``one_for_one`` because the services do not depend on each other's
processes: a crash loop in one of them is that service's supervisor
escalating, and only that service is restarted.

Configuration is CouchDB's: ini sections named as in the seeds (``[ioq2]``,
``[ioq]``, ``[osq]``, ``[smoosh]``, ``[smoosh.<channel>]``, ``[replicator]``,
``[couch_jobs]``), read by each service with the seeds' defaults.  The app
only fills in where files go (a state directory) when the config does not
say, plus its own ``[couch]`` section (see `COUCH_DEFAULTS`).  Values are
set on ``node.config``, so every host process's replica sees them and later
changes reach the running services.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, Mapping

import supervision
from actors import INCARNATION_ENDED, ActorRef, Exit, Node
from actors.config import Config
from actors.couch_jobs import api, process
from actors.couch_jobs.process import DATABASE_PATH_KEY, STORE_KEY
from actors.couch_jobs.sup import CouchJobsSup
from actors.ioq.api import num_servers
from actors.ioq.sup import IoqSup
from actors.replicator import ReplicationJob, ReplicatorSup
from actors.smoosh import SQLiteAdapter
from actors.smoosh.sup import SmooshSup
from supervision import ChildSpec, SupFlags

__all__ = [
    "App",
    "COUCH_DEFAULTS",
    "COUCH_SUP",
    "SUBSYSTEMS",
    "CouchSup",
    "app_children",
    "load_config",
    "start_app",
]

#: Registered name of the top supervisor.
COUCH_SUP = "couch_sup"

#: Subsystem -> registered name of its top supervisor, in start order.
SUBSYSTEMS: dict[str, str] = {
    "ioq": "ioq_sup",
    "couch_jobs": "couch_jobs_sup",
    "smoosh": "smoosh_sup",
    "replicator": "couch_replicator_sup",
}

#: The ``[couch]`` section: this app's own knobs (everything else is the services').
COUCH_DEFAULTS: dict[str, str] = {
    "state_dir": "",  # empty: a fresh temporary directory, removed by App.stop()
    "intensity": "10",  # couch_sup restarts tolerated ...
    "period": "10",  # ... within this many seconds
    "ioq_pin": "true",  # pin IOQ2 server i to the i-th allowed CPU
    "smoosh_host": "smoosh",  # host process of the smoosh tree
    "replicator_job_host": "own",  # "own": one host process per job; "none": threads of the tree
}

#: Seconds the app waits for the whole tree to stop.
STOP_TIMEOUT = 90.0


class CouchSup(supervision.Supervisor):
    """``couch_sup``: the services' supervisors side by side (``one_for_one``)."""

    def init(self, flags: SupFlags, children: list[ChildSpec]) -> tuple[SupFlags, list[ChildSpec]]:
        return flags, children


def load_config(config: Any) -> Config:
    """``config`` as a `Config`: an ini path, a `Config`, a ``{section: {key: value}}`` mapping or None."""
    if config is None:
        return Config()
    if isinstance(config, Config):
        return config
    if isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"config file {path!r} does not exist")
        return Config.from_ini(path)
    if isinstance(config, Mapping):
        return Config(config)
    raise TypeError(f"config must be an ini path, a Config, a mapping or None, got {config!r}")


def _apply(node: Node, cfg: Config) -> None:
    """Copy every setting of ``cfg`` onto the node's config (reaching every host's replica)."""
    for section in cfg.sections():
        for key, value in cfg.section(section).items():
            if node.config.get(section, key) != value:
                node.config.set(section, key, value)


def _default(node: Node, section: str, key: str, value: str) -> str:
    """``[section] key`` from the node config, setting ``value`` there when it is missing."""
    current = node.config.get(section, key)
    if current in (None, ""):
        node.config.set(section, key, value)
        return value
    return str(current)


def app_children(
    *,
    ioq_count: int | None,
    ioq_pin: bool,
    couch_jobs_path: str,
    smoosh_adapter: Any,
    smoosh_host: str | None,
    smoosh_overrides: Mapping[str, Any] | None = None,
    smoosh_observer: Any = None,
    replicator_job_factory: Any = None,
    replicator_job_host: str | None = "own",
) -> list[ChildSpec]:
    """The child specs of ``couch_sup``, one per service, in start order."""

    return [
        ChildSpec(SUBSYSTEMS["ioq"], (IoqSup, (ioq_count, ioq_pin)), type="supervisor", name=SUBSYSTEMS["ioq"]),
        ChildSpec(
            SUBSYSTEMS["couch_jobs"],
            (CouchJobsSup, (couch_jobs_path,)),
            type="supervisor",
            name=SUBSYSTEMS["couch_jobs"],
        ),
        ChildSpec(
            SUBSYSTEMS["smoosh"],
            (SmooshSup, (smoosh_adapter, dict(smoosh_overrides or {}), smoosh_observer)),
            type="supervisor",
            host=smoosh_host,
            name=SUBSYSTEMS["smoosh"],
        ),
        ChildSpec(
            SUBSYSTEMS["replicator"],
            (ReplicatorSup, (replicator_job_factory or ReplicationJob, replicator_job_host)),
            type="supervisor",
            name=SUBSYSTEMS["replicator"],
        ),
    ]


@dataclass
class App:
    """A running application: its top supervisor, where its files are, how to stop it."""

    node: Node
    top: ActorRef
    state_dir: str
    data_dir: str
    couch_jobs_path: str
    smoosh_state_dir: str
    adapter: Any
    names: dict[str, str] = field(default_factory=lambda: dict(SUBSYSTEMS))
    owns_state_dir: bool = False
    stopped: bool = False

    def whereis(self, subsystem: str) -> ActorRef | None:
        """The running top supervisor of ``subsystem`` (``ioq``, ``smoosh``, ``replicator``, ``couch_jobs``)."""
        if subsystem not in self.names:
            raise KeyError(f"unknown subsystem {subsystem!r}; one of {', '.join(self.names)}")
        return self.node.whereis(self.names[subsystem])

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop the tree (every service's ``terminate`` runs), close couch_jobs' store here.

        The state directory stays, unless the app created it as a temporary
        directory.  Idempotent.
        """
        if self.stopped:
            return
        self.stopped = True
        try:
            self.node.stop(self.top, "shutdown", timeout=timeout)
        except Exit as exc:
            # Gone already: with its node's incarnation (an incarnation that ended stops every actor).
            if exc.reason not in ("noproc", "noconnection", INCARNATION_ENDED):
                raise
        finally:  # what the app holds in this process is released however the tree stopped
            _close_couch_jobs()
            close = getattr(self.adapter, "close", None)
            if callable(close):
                close()
            if self.owns_state_dir:
                shutil.rmtree(self.state_dir, ignore_errors=True)


def _close_couch_jobs() -> None:
    jobs = api._default
    process.detach()
    api.set_default(None)
    if jobs is not None:
        jobs.close()


def start_app(
    node: Node,
    config: Any = None,
    state_dir: str | os.PathLike[str] | None = None,
    *,
    smoosh_overrides: Mapping[str, Any] | None = None,
    smoosh_observer: Any = None,
    replicator_job_factory: Any = None,
) -> App:
    """Start IOQ, couch_jobs, smoosh and the replicator under ``couch_sup``; returns the `App`.

    ``config``: an ini file, a `Config` or a mapping applied on top of the
    node's config (None: the node's config as it is, seeds' defaults for
    everything unset).  ``state_dir``: where SQLite files and smoosh's
    queue checkpoints live (else ``[couch] state_dir``, else a fresh
    temporary directory).  The keyword arguments are for tests and the
    demo: `ServerSettings` overrides and an observer ref for smoosh, and a
    job class for the replicator.
    """

    _apply(node, load_config(config))
    for key, value in COUCH_DEFAULTS.items():
        _default(node, "couch", key, value)
    owns = False
    if state_dir is None:
        state_dir = node.config.get("couch", "state_dir") or None
    if state_dir is None:
        state_dir = tempfile.mkdtemp(prefix="couch-")
        owns = True
    state_dir = os.path.abspath(os.fspath(state_dir))
    node.config.set("couch", "state_dir", state_dir)
    data_dir = os.path.join(state_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    # ``[couch_jobs] store`` (a URL: sqlite:/// or postgresql://) wins over
    # ``database_path``, exactly as every worker process chooses its store.
    jobs_path = node.config.get("couch_jobs", STORE_KEY) or _default(
        node, "couch_jobs", DATABASE_PATH_KEY, os.path.join(state_dir, "couch_jobs.sqlite")
    )
    smoosh_dir = _default(node, "smoosh", "state_dir", os.path.join(state_dir, "smoosh"))
    os.makedirs(smoosh_dir, exist_ok=True)

    cfg = node.config
    flags = SupFlags(
        "one_for_one",
        intensity=cfg.get_integer("couch", "intensity", 10),
        period=cfg.get_float("couch", "period", 10.0),
    )
    job_host = cfg.get("couch", "replicator_job_host", "own")
    smoosh_host = cfg.get("couch", "smoosh_host", "smoosh")
    adapter = SQLiteAdapter(data_dir)
    children = app_children(
        ioq_count=num_servers(cfg),
        ioq_pin=cfg.get_boolean("couch", "ioq_pin", True),
        couch_jobs_path=jobs_path,
        smoosh_adapter=adapter,
        smoosh_host=None if smoosh_host in ("", "none") else smoosh_host,
        smoosh_overrides=smoosh_overrides,
        smoosh_observer=smoosh_observer,
        replicator_job_factory=replicator_job_factory,
        replicator_job_host=None if job_host in ("", "none") else job_host,
    )
    try:
        top = supervision.start_supervisor(node, flags, children, name=COUCH_SUP, cls=CouchSup)
    except BaseException:
        # A tree that failed halfway may have attached couch_jobs to this process (its store,
        # its listener): released here, or the next start would find it attached to a node
        # that is gone (an incarnation that ended while the application started, say).
        _close_couch_jobs()
        adapter.close()
        if owns:
            shutil.rmtree(state_dir, ignore_errors=True)
        raise
    # couch_jobs_sup attached this process (StoreInit ran here); connect its
    # agent to the wake-up hub now rather than at the agent's next retry.
    att = process.attachment()
    if att is not None:
        att.agent.cast("find_hub")
        att.agent.call("hub", timeout=10.0)
    return App(
        node=node,
        top=top,
        state_dir=state_dir,
        data_dir=data_dir,
        couch_jobs_path=jobs_path,
        smoosh_state_dir=smoosh_dir,
        adapter=adapter,
        owns_state_dir=owns,
    )
