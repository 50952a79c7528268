"""``demo --nodes N``: the main job on N node processes connected over tcp, whole nodes SIGKILLed.

The demo process is the *controller*: a distributed node (``ctl``) that
writes a fresh cluster key into the state directory, boots the application
itself (smoosh and the first IOQ readers are driven here, as in the one-node
demo), and
starts N node processes (``python -m actors node``, names ``n1``..``nN``,
tcp on 127.0.0.1, seeded with the controller's address), each running the
whole application with its own state directory and the same couch_jobs
store (the SQLite file in the state directory, or ``--store postgres``).

Then, for ``--duration`` seconds:

* couch_jobs workers on every node (two on each node process, each in a
  host process of its own) finish the jobs the controller adds, through
  the shared store;
* a reader on every node reads the controller's files through that node's
  IOQ and checks every byte (`NodeReads`), beside the controller's own
  readers;
* the continuous replications are documents in a shared ``_replicator``
  file, run by the clustered replicator of every node (``[replicator]
  cluster = true``): each job on its owner among the live nodes, moved
  when membership changes (`ClusterReplications` only watches).  On
  PostgreSQL (``--store postgres`` or a URL) the replicator shares that
  store (``[replicator] store``): documents, sources, targets, leases and
  the audit of runs, from which the summary proves that no job ran on two
  nodes at once;
* a counter entity per key (`actors.sharding`, the ``demo_counter`` type
  on every node, a proxy region on the controller) is incremented from the
  controller, each increment written before it is acknowledged
  (`ShardedCounters`);
* the actor killer kills actors and SIGKILLs host processes on every node;
* the node killer SIGKILLs a whole node process every few seconds (one
  down at a time) and restarts it: a new incarnation that reconnects and
  gets its job workers back.

The summary adds the nodes to the one-node checks: every job finished
exactly once, every replication target holds every source document, every
IOQ byte checked, every killed node back, how many entity calls were made
and that every acknowledged increment is in its counter.  The nodes get SIGTERM at the end
(or on Ctrl-C/SIGTERM of the demo), and stop with the controller even if it
is SIGKILLed (``--stop-with-parent``).
"""

from __future__ import annotations

import configparser
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors import ActorRef, CallTimeout, Exit, Node, global_names, pg
from actors.app.couch import COUCH_SUP, start_app
from actors.app.demo import SMOOSH_OVERRIDES, Outcome, _load, _report, run_demo
from actors.app.workload import (
    WORKLOAD_SUP,
    DbWriter,
    IoqReaders,
    JobsDriver,
    Killer,
    SmooshObserver,
    WorkloadSup,
    start_workload,
)
from actors.app.workload.cluster_replication import ClusterReplications
from actors.app.workload.entities import ShardedCounters, counter_spec
from actors.app.workload.ioq_reads import file_specs, make_files
from actors.app.workload.jobs import JOB_TYPE, JobWorker
from actors.app.workload.netchaos import NetChaos
from actors.app.workload.netns import Topology
from actors.app.workload.node_killer import NodeKiller
from actors.app.workload.node_reads import NodeReads, reader_spec
from actors.app.workload.nodes import NodeProc, NodeSet
from actors.app.workload.singleton import SingletonWatch, singleton_spec
from actors.app.workload.view import LiveView
from actors.cluster_key import write_new
from actors.config import Config
from actors.interrupt import deferred
from supervision import ChildSpec, start_child

__all__ = ["CONTROLLER", "WORKERS_PER_NODE", "HostsPlan", "node_config", "run_cluster_demo"]

#: The controller node's name; the nodes are ``n1``..``nN``.
CONTROLLER = "ctl"
#: couch_jobs workers on each node process (each in a host process of its own).
WORKERS_PER_NODE = 2
#: Seconds between two node SIGKILLs (the first comes after a third of the run in --short).
NODE_KILL_PERIOD = 8.0
#: What the nodes run differently from the controller: replication jobs as threads of the
#: replicator tree rather than one host process each (N nodes on one machine are many processes).
NODE_OVERRIDES: dict[str, dict[str, str]] = {
    "couch": {"replicator_job_host": "none"},
    # The clustered replicator (docs/replicator.md, "Across nodes"), with a quiet period that fits a
    # run of seconds; the controller's replicator stays unclustered, so the controller is no member.
    "replicator": {
        "cluster": "true",
        "cluster_quiet_period": "2",
        "cluster_start_period": "1",
        "doc_poll_interval": "0.2",
    },
}


#: Seconds a replication job's lease lasts in the demo (PostgreSQL store): a killed node's
#: jobs are free again this long after its last renewal.
DEMO_LEASE_TTL = "4"


def node_config(
    cfg: Config, jobs_store: dict[str, str], path: str, replicator_db: str, replicator_store: str | None = None
) -> None:
    """Write the nodes' ini file: the demo settings, the shared couch_jobs store and ``_replicator``
    file (or, on PostgreSQL, the replicator's store), `NODE_OVERRIDES`."""
    parser = configparser.ConfigParser(interpolation=None)
    for section in cfg.sections():
        # every node has its own state directory (--state-dir); only the couch_jobs store is shared
        parser[section] = {
            k: v for k, v in cfg.section(section).items() if not (section == "couch" and k == "state_dir")
        }
    for section, values in NODE_OVERRIDES.items():
        parser[section] = {**(dict(parser[section]) if parser.has_section(section) else {}), **values}
    jobs = dict(parser["couch_jobs"]) if parser.has_section("couch_jobs") else {}
    parser["couch_jobs"] = {**jobs, **jobs_store}
    parser["replicator"]["replicator_db"] = replicator_db
    if replicator_store is not None:
        parser["replicator"]["store"] = replicator_store
        parser["replicator"]["lease_ttl"] = DEMO_LEASE_TTL
    with open(path, "w", encoding="utf-8") as fh:
        parser.write(fh)


def _descends_from(pid: int, roots: set[int], depth: int = 6) -> bool:
    """Whether ``pid`` is a (grand)child of one of ``roots`` (not a root itself), from /proc."""
    current = pid
    for _ in range(depth):
        try:
            with open(f"/proc/{current}/stat", encoding="ascii") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
        if ppid in roots:
            return True
        if ppid <= 1:
            return False
        current = ppid
    return False


def run_cluster_demo(args: Any, *, observe: Callable[..., Any] | None = None) -> int:
    """``demo --nodes N`` (N >= 2): exit statuses as `run_demo`'s (``observe`` as there)."""
    n_nodes = int(args.nodes)

    def make_node(state_dir: str, metrics: int | None = None) -> Node:
        key = os.path.join(state_dir, "cluster.key")
        write_new(key)
        return Node(name=CONTROLLER, listen="tcp://127.0.0.1:0", cluster_key=key, metrics=metrics)

    def body(
        node: Node,
        cfg: Config,
        state_dir: str,
        duration: float,
        rate: float,
        grace: float,
        live: bool,
        seed: int,
        outcome: Outcome,
        *,
        short: bool,
    ) -> None:
        _run_cluster(
            node,
            cfg,
            state_dir,
            n_nodes,
            duration,
            rate,
            grace,
            live,
            seed,
            outcome,
            short=short,
            metrics=getattr(args, "metrics", None),
        )

    return run_demo(args, make_node=make_node, body=body, observe=observe)


@dataclass(frozen=True)
class HostsPlan:
    """``demo --hosts``: the nodes' namespace hosts (name -> listen address and command prefix), and the
    network chaos's timing."""

    topo: Topology
    places: dict[str, tuple[str, list[str]]]
    net_ticktime: float
    fault_period: float
    hold: float
    heal_limit: float


def _run_cluster(
    node: Node,
    cfg: Config,
    state_dir: str,
    n_nodes: int,
    duration: float,
    rate: float,
    grace: float,
    live: bool,
    seed: int,
    outcome: Outcome,
    *,
    short: bool,
    metrics: int | None = None,
    hosts: HostsPlan | None = None,
) -> None:
    t0 = time.monotonic()
    print(f"controller {node.name} at {node.address}, runtime directory {node.rundir}", flush=True)
    pg.start(node)  # the readers' group, seen from here; every `otpy node` runs its own
    global_names.start(node)
    writer_box: list[Any] = []
    observer = node.spawn(SmooshObserver, lambda ev, rest: writer_box and writer_box[0].on_event(ev, rest))
    app = start_app(node, cfg, state_dir, smoosh_overrides=SMOOSH_OVERRIDES, smoosh_observer=observer)
    store = {k: v for k in ("store", "database_path") if (v := node.config.get("couch_jobs", k))}
    ini = os.path.join(state_dir, "node.ini")
    # On PostgreSQL (--store postgres or a URL) the replicator shares couch_jobs' store: its
    # documents, databases, leases and audit of runs live there, reached by every node.
    pg_store = store.get("store") if str(store.get("store", "")).startswith(("postgresql://", "postgres://")) else None
    replicator_db = pg_store or os.path.join(state_dir, "replication", "_replicator.sqlite")
    os.makedirs(os.path.join(state_dir, "replication"), exist_ok=True)
    node_config(cfg, store, ini, replicator_db, pg_store)
    jobs = JobsDriver(node, batch=2, period=0.1, group=lambda worker: f"n{worker // 10}" if worker >= 10 else node.name)
    jobs.setup()  # the type's timeout and the finish log table, before any worker accepts

    n_servers = len([a for a in node.actors() if str(a.get("registered") or "").startswith("ioq_server_")])
    files = make_files(os.path.join(state_dir, "ioq"), count=max(2, 2 * n_servers), size=256 * 1024, seed=seed)
    paths = [p for p, _ in files]
    names = [f"n{i + 1}" for i in range(n_nodes)]
    workload_sup: ActorRef | None = None
    counters = ShardedCounters(node, os.path.join(state_dir, "sharding", "counters.sqlite"), seed=seed)
    sharded = [counter_spec(counters.path, pg_store)]
    nodes = NodeSet(
        node,
        names,
        key_path=os.path.join(state_dir, "cluster.key"),
        config_path=ini,
        state_dir=os.path.join(state_dir, "nodes"),
        on_up=lambda n: _start_workers(node, n, names, paths, seed, sharded),
        metrics=metrics,
        hosts=hosts.places if hosts else None,
        net_ticktime=hosts.net_ticktime if hosts else None,
    )
    killer = node_killer = repl = net_chaos = None
    try:
        failed = nodes.start_all()
        if failed:
            raise RuntimeError("nodes did not start: " + "; ".join(failed))
        print(
            f"controller and {n_nodes} nodes up in {time.monotonic() - t0:.1f} s: {nodes.line()}; "
            f"state directory {state_dir}",
            flush=True,
        )
        for n in nodes.nodes.values():
            print(
                f"  node {n.name} at {n.address}, runtime directory {n.rundir} (attach: otpy status {n.rundir})"
                + (f", metrics: {n.metrics_url}" if n.metrics_url else ""),
                flush=True,
            )

        workload_sup = start_workload(node, paths, workers=0)
        start_child(workload_sup, singleton_spec(names))  # one Beacon in the cluster, failing over
        writer = DbWriter(node, app.data_dir, app.smoosh_state_dir, dbs=6 if short else 10, seed=seed)
        writer_box.append(writer)
        reads = IoqReaders(node, files, threads=2, seed=seed)
        node_reads = NodeReads(node, nodes.up)
        singleton = SingletonWatch(node, nodes.up)
        repl = ClusterReplications(
            node,
            os.path.join(state_dir, "replication"),
            nodes.up,
            replicator_db,
            jobs=6 if short else 9,
            seed=seed,
            store=pg_store,
        )
        repl.setup()
        counters.setup()
        local_tops = [app.top, workload_sup]

        def trees() -> list[ActorRef]:
            out = list(local_tops)
            for name in nodes.up():
                for reg in (COUCH_SUP, WORKLOAD_SUP):
                    try:
                        ref = node.whereis(reg, node=name, timeout=1.0)
                    except (Exit, CallTimeout):
                        ref = None
                    if ref is not None:
                        out.append(ref)
            return out

        def may_sigkill(pid: int) -> bool:  # a host process of the controller or of a node this demo started
            return pid != os.getpid() and pid not in nodes.pids() and _descends_from(pid, nodes.pids() | {os.getpid()})

        killer = Killer(node, trees, rate, seed=seed, may_sigkill=may_sigkill)
        # On hosts the network faults come first: a node SIGKILLed early may take the run's first third to boot.
        node_killer = NodeKiller(
            nodes,
            NODE_KILL_PERIOD,
            seed=seed,
            first_after=duration * 0.6 if hosts else min(NODE_KILL_PERIOD, duration / 3),
        )
        drivers = {
            "smoosh": writer,
            "ioq": reads,
            "node_ioq": node_reads,
            "jobs": jobs,
            "replication": repl,
            "killer": killer,
            "nodes": nodes,
            "node_killer": node_killer,
            "singleton": singleton,
            "sharding": counters,
        }
        loads: tuple[Any, ...] = (writer, reads, node_reads, jobs, repl, singleton, counters, killer, node_killer)
        chaos: list[Any] = [killer, node_killer]
        checked: tuple[Any, ...] = (nodes, jobs, repl, writer, reads, node_reads, singleton, counters)
        if hosts is not None:
            net_chaos = NetChaos(
                node,
                nodes,
                hosts.topo,
                hosts.fault_period,
                hosts.hold,
                hosts.heal_limit,
                first_after=min(hosts.fault_period, duration / 6),
                seed=seed,
            )
            drivers["net_chaos"] = net_chaos
            loads, chaos, checked = loads + (net_chaos,), chaos + [net_chaos], (net_chaos,) + checked
        view = LiveView(node, app, drivers, duration)
        start = _load(
            view,
            loads,
            duration,
            live,
            short,
            outcome,
            f"workload (seed {seed}): {len(files)} files read through IOQ on {node.name} and on every node, "
            f"{len(writer.dbs)} "
            f"databases for smoosh on {node.name}, {repl.n_jobs} replications over {n_nodes} nodes, couch_jobs "
            f"workers on every node ({WORKERS_PER_NODE} each), one singleton named cluster-wide, "
            f"counter entities of {len(counters.keys)} keys sharded over the nodes; killing actors "
            f"{rate:g}/s and a whole node every {NODE_KILL_PERIOD:g} s for {duration:g} s"
            + (
                f"; cutting a node's host off, or a pair of hosts apart, for {hosts.hold:g} s every "
                f"{hosts.fault_period:g} s (net_ticktime {hosts.net_ticktime:g} s)"
                if hosts
                else ""
            ),
        )
        with deferred():
            _report(node, app, view, chaos, drivers, checked, duration, rate, seed, grace, start, live, outcome)
    finally:
        with deferred():
            for d in (net_chaos, node_killer, killer):
                if d is not None:
                    d.stop()
            nodes.stop_all()
            if node_killer is not None:
                node_killer.join(timeout=30)  # a restart under way ends with the node set's stop
            if workload_sup is not None:
                try:
                    node.stop(workload_sup, "shutdown", timeout=30)
                except Exception:  # already gone (killed, or the node is closing): nothing left to stop
                    pass
            if repl is not None:
                repl.close()
            app.stop()


def _start_workers(
    ctl: Node, n: NodeProc, names: list[str], paths: list[str], seed: int, sharded: list[ChildSpec]
) -> None:
    """Put the demo's job workers, file actors, IOQ reader and sharded types on node ``n`` (again, after
    a restart), under a workload supervisor there."""
    base = 10 * (names.index(n.name) + 1)
    specs = [
        ChildSpec(f"job_worker_{base + i}", (JobWorker, (JOB_TYPE, base + i)), host=f"jobs{i}")
        for i in range(WORKERS_PER_NODE)
    ]
    specs += file_specs(paths) + [reader_spec(paths, seed + base)] + sharded
    ctl.spawn(WorkloadSup, specs, name=WORKLOAD_SUP, node=n.name)
