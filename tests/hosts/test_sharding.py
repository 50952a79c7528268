"""Sharded counters on three ``otpy node`` daemons (namespace hosts) under one fault after another.

Each node starts the ``counter`` type from its ini file (``[sharding] types``).
The test drives a counter per key for 1,000 keys from every node (a thread
per node calls its region through the node's runtime directory, as
`EntityRef.call` does inside the node), and samples every node's served
keys the same way (`tests.hosts.sharding_actors.Sampler`), never over the
network, so no fault reaches the test's view.  Faults, one after another:
a node SIGKILLed (started again), a host cut off, a pair cut apart, a node
frozen past its lease, a node cut from the store only.

With a store (PostgreSQL on the database host): every acknowledged increment
is in the final count; no key is ever served by two nodes at once (two
nodes' intervals ``[built, sampled]`` of one key never meet); the store's
audit of shard leases has no overlapping runs; a node cut from the store
stops serving before its leases' expiry in the store; a thawed node serves
nothing another node took over.  Without a store the same run reports the
keys it saw served twice (docs/sharding.md states the figure).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import cloudpickle
import pytest

from actors import ActorRef
from actors.attach import Attached
from actors.leases import PgStore, overlapping_runs
from actors.leases import sql as lease_sql
from actors.sharding import shard_of
from actors.sharding.names import region_name
from tests.hosts.conftest import HOSTS, NET_TICKTIME
from tests.hosts.nodes import PORT, Cluster, HostNode
from tests.hosts.postgres_host import PostgresHost
from tests.hosts.sharding_actors import SHARDS, TYPE, Sampler
from tests.hosts.topology import Topology

KEYS = [f"k{i}" for i in range(1000)]
TTL = 3.0
CALL_TIMEOUT = 2.0
SAMPLE_EVERY = 0.2  # seconds between one node's samples: a state no message announces
HEAL_WITHIN = 2 * NET_TICKTIME + 30.0
_count = iter(range(1_000_000))


def _config(tmp_path: Any, store: str | None) -> str:
    """The nodes' ini file: the counter type from ``[sharding] types``, short lease and rounds."""
    path = os.path.join(str(tmp_path), "node.ini")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(
            f"[sharding]\ntypes = {TYPE} = tests.hosts.sharding_actors:Counter\nshards = {SHARDS}\nidle = none\n"
            f"lease_ttl = {TTL:g}\nrebalance_every = 0.5\n" + (f"store = {store}\n" if store else "")
        )
    return path


class View:
    """One thread's way into one node: an `Attached` view of its current runtime directory."""

    def __init__(self, cluster: Cluster, name: str) -> None:
        self.cluster = cluster
        self.name = name
        self.attached: Attached | None = None
        self.rundir: str | None = None
        self.refs: dict[str, ActorRef] = {}

    def get(self) -> Attached | None:
        node = self.cluster.nodes[self.name]
        rundir = node.readies[-1].rundir if node.readies else None
        if rundir != self.rundir:
            self.reset()
            self.rundir = rundir
        if self.attached is None and rundir is not None:
            self.attached = Attached(rundir, timeout=CALL_TIMEOUT)
        return self.attached

    def reset(self) -> None:
        if self.attached is not None:
            self.attached.close()
        self.attached = None
        self.refs = {}

    def region(self) -> ActorRef | None:
        view = self.get()
        if view is None:
            return None
        if "region" not in self.refs:
            found = view.whereis(region_name(TYPE))
            if found is None:
                return None
            self.refs["region"] = found
        return self.refs["region"]

    def sampler(self) -> ActorRef | None:
        view = self.get()
        if view is None:
            return None
        if "sampler" not in self.refs:
            payload = cloudpickle.dumps((Sampler, (), {}, None, None, False))
            kind, detail = view.ask("spawn_on", [self.name], None, None, payload, timeout=CALL_TIMEOUT)
            if kind != "ok":
                return None
            self.refs["sampler"] = detail
        return self.refs["sampler"]


@dataclass
class Sample:
    node: str
    at: float
    served: dict[str, float]


@dataclass(repr=False)
class History:
    """What the drivers and samplers saw; every change wakes `wait_for`."""

    acked: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KEYS, 0))
    tried: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KEYS, 0))
    samples: list[Sample] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def total(self) -> int:
        return sum(self.acked.values())

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float) -> Any:
        """The first truthy ``check()``, looked at on every ack and sample; bounded in time."""
        deadline = time.monotonic() + timeout
        with self.changed:
            for _ in range(1_000_000):
                value = check()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.changed.wait(min(left, 1.0))
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")

    def last(self, node: str, since: float = 0.0) -> Sample | None:
        """``node``'s last sample, if it was taken after ``since``."""
        for s in reversed(self.samples):
            if s.node == node:
                return s if s.at > since else None
        return None

    def served_by(self, node: str) -> set[str]:
        """The keys ``node`` served in its last sample."""
        s = self.last(node)
        return set() if s is None else set(s.served)

    def taken_over(self, keys: set[str], by: set[str], since: float) -> bool:
        return any(s.node in by and s.at > since and keys & s.served.keys() for s in self.samples[-30:])


def _drive(cluster: Cluster, name: str, offset: int, history: History, stop: threading.Event) -> None:
    """Increment the keys in turn through ``name``'s region, counting what was tried and acknowledged."""
    view = View(cluster, name)
    try:
        for i in range(offset, offset + 10_000_000):
            if stop.is_set():
                return
            key = KEYS[i % len(KEYS)]
            try:
                region = view.region()
                if region is None:
                    stop.wait(0.1)  # the node is starting: poll its readiness at a short fixed pace
                    continue
                with history.changed:
                    history.tried[key] += 1
                answer = view.get().call(region, ("deliver", key, 1), timeout=CALL_TIMEOUT)  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 -- killed, frozen, cut, between incarnations: try again
                view.reset()
                continue
            if answer[0] == "ok":
                with history.changed:
                    history.acked[key] += 1
                    history.changed.notify_all()
    finally:
        view.reset()


def _sample(cluster: Cluster, name: str, history: History, stop: threading.Event) -> None:
    """Ask ``name``'s `Sampler` what it serves, every `SAMPLE_EVERY` s until ``stop``."""
    view = View(cluster, name)
    try:
        for _ in range(10_000_000):
            if stop.wait(SAMPLE_EVERY):
                return
            try:
                sampler = view.sampler()
                if sampler is None:
                    continue
                at, served = view.get().call(sampler, "sample", timeout=CALL_TIMEOUT)  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 -- frozen, restarting: no sample this time
                view.reset()
                continue
            with history.changed:
                history.samples.append(Sample(name, at, served))
                history.changed.notify_all()
    finally:
        view.reset()


def overlaps(samples: list[Sample]) -> dict[str, tuple[str, str, float, float]]:
    """Keys two nodes served at once: ``key -> (node, node, seconds shared, since)`` (the longest).

    A node served a key from the moment its object was built until at least
    each sample that lists it with that build time; two such intervals of one
    key on two nodes that meet mean two activations at once."""
    spans: dict[tuple[str, str, float], float] = {}
    for s in samples:
        for key, built in s.served.items():
            spans[(key, s.node, built)] = max(s.at, spans.get((key, s.node, built), s.at))
    by_key: dict[str, list[tuple[str, float, float]]] = {}
    for (key, node, built), last in spans.items():
        by_key.setdefault(key, []).append((node, built, last))
    found: dict[str, tuple[str, str, float, float]] = {}
    for key, runs in by_key.items():
        for i, (n1, b1, e1) in enumerate(runs):
            for n2, b2, e2 in runs[i + 1 :]:
                shared = min(e1, e2) - max(b1, b2)
                if n1 != n2 and shared >= 0 and shared >= found.get(key, ("", "", -1.0, 0.0))[2]:
                    found[key] = (n1, n2, shared, max(b1, b2))
    return found


@dataclass
class Run:
    topo: Topology
    cluster: Cluster
    config: str
    key: str
    history: History
    stop: threading.Event
    threads: list[threading.Thread]
    lease_url: str | None  # the test's own way to the store (unix socket), if there is one
    began: float = field(default_factory=time.monotonic)
    faults: list[tuple[float, str]] = field(default_factory=list)  # (wall clock, fault) as injected

    def fault(self, what: str) -> float:
        """Note a fault as it is injected; its wall-clock time (the samples' clock)."""
        now = time.time()
        self.faults.append((now, what))
        return now

    def phase(self, what: str) -> None:
        """Say how far the run got (in the output of a failed or verbose run)."""
        print(f"{time.monotonic() - self.began:6.1f} s  {what}: {self.history.total} acknowledged", flush=True)

    def restart(self, name: str) -> None:
        seeds = [f"tcp://{self.topo[h].address}:{PORT}" for h in HOSTS]
        self.cluster.nodes[name] = HostNode(
            self.topo[name], name, self.key, seeds, self.cluster.workdir, NET_TICKTIME, self.config
        )
        self.cluster[name].wait_ready(timeout=120.0)

    def takeover(self, victim: str, since: float, keys: set[str]) -> None:
        """Wait until another node serves one of ``keys``, which ``victim`` served before the fault."""
        others = set(HOSTS) - {victim}
        self.history.wait_for(
            f"{victim}'s keys served elsewhere", lambda: self.history.taken_over(keys, others, since), 60.0
        )

    def progress(self, more: int, timeout: float = 60.0) -> None:
        target = self.history.total + more
        self.history.wait_for(f"{more} more acknowledged increments", lambda: self.history.total >= target, timeout)


@pytest.fixture
def run(request: Any, topo: Topology, postgres: PostgresHost, cluster_key: str, tmp_path: Any) -> Iterator[Run]:
    import psycopg

    with_store: bool = request.param
    database = f"shard_{os.getpid()}_{next(_count)}"
    with psycopg.connect(postgres.local_url("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    node_url = f"postgresql://postgres@{postgres.host.address}:{postgres.port}/{database}"
    config = _config(tmp_path, node_url if with_store else None)
    cluster = None
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        cluster = Cluster(topo, HOSTS, cluster_key, NET_TICKTIME, config=config, workdir=str(tmp_path))
        cluster.wait_mesh(60.0)
        history = History()
        for i, name in enumerate(HOSTS):
            threads.append(threading.Thread(target=_drive, args=(cluster, name, i * 333, history, stop), daemon=True))
            threads.append(threading.Thread(target=_sample, args=(cluster, name, history, stop), daemon=True))
        for t in threads:
            t.start()
        yield Run(
            topo,
            cluster,
            config,
            cluster_key,
            history,
            stop,
            threads,
            postgres.local_url(database) if with_store else None,
        )
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=CALL_TIMEOUT + 10.0)
        try:
            topo.heal()
        finally:
            if cluster is not None:
                cluster.close()
            with psycopg.connect(postgres.local_url("postgres"), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def _faults(r: Run, with_store: bool) -> dict[str, Any]:
    """One fault after another, each healed before the next; what the store cut showed, if any."""
    h, topo, cluster = r.history, r.topo, r.cluster
    h.wait_for("every key served once", lambda: all(h.acked.values()), 90.0)
    r.phase("every key served")
    if with_store:
        # A node SIGKILLed, then started again.  (Without a store neither this
        # nor a host cut off serves a key twice: the dead or cut-off node
        # stops, by death or by ending its incarnation, before its keys are
        # taken over; so that run goes straight to the faults that do.)
        keys, t = h.served_by("h3"), r.fault("h3 SIGKILLed")
        topo.crash("h3")
        cluster["h3"].proc.wait(timeout=30)
        r.takeover("h3", t, keys)
        r.phase("h3 killed, its keys taken over")
        r.restart("h3")
        cluster.wait_mesh(HEAL_WITHIN)
        # A host cut off: the majority takes its keys over; it comes back as a new incarnation.
        r.progress(200)
        keys, t = h.served_by("h2"), r.fault("h2 cut off")
        topo.cut("h2")
        r.takeover("h2", t, keys)
        r.phase("h2 cut off, its keys taken over")
        topo.heal()
        cluster.wait_mesh(HEAL_WITHIN)
    # A pair cut apart, h2 still seeing both.
    r.progress(200)
    r.fault("h1 and h3 cut apart")
    topo.cut_pair("h1", "h3")
    cluster.wait_views({"h1": ["h2"], "h2": ["h1", "h3"], "h3": ["h2"]}, 20.0, "the pair cut")
    r.phase("pair cut")
    t = time.time()  # held past a lease, so leases the views moved run out while it lasts
    h.wait_for("the pair cut outlasts a lease", lambda: h.samples[-1].at > t + TTL + 1.0, 3 * TTL + 10.0)
    topo.heal()
    cluster.wait_mesh(HEAL_WITHIN)
    # A node frozen past its lease, then thawed.
    r.progress(200)
    keys, t = h.served_by("h1"), r.fault("h1 frozen")
    topo.freeze("h1")
    try:
        r.takeover("h1", t, keys)
        r.phase("h1 frozen, its keys taken over")
    finally:
        topo.thaw("h1")
    cluster.wait_mesh(HEAL_WITHIN)
    if not with_store:
        return {}
    # A node cut from the store only: it stops serving before its leases can expire there.
    r.progress(200)
    victim = max(HOSTS, key=lambda n: len(h.served_by(n)))
    t = r.fault(f"{victim} cut from the store")
    topo.cut_pair(victim, "db")
    h.wait_for(f"{victim} stops serving", lambda: (lambda s: s is not None and not s.served)(h.last(victim, t)), 30.0)
    r.phase(f"{victim} cut from the store, serving nothing")
    expiry = _lease_expiry(r.lease_url, victim)
    seen = [s for s in h.samples if s.node == victim and s.at > t and s.served]
    topo.heal()
    r.progress(200)
    return {"victim": victim, "cut": t, "expiry": expiry, "served_during_cut": seen}


def _lease_expiry(url: str | None, node: str) -> dict[int, float]:
    """``shard -> expires_at`` (store clock: the hosts' kernel clock) of the leases ``node`` holds in the store."""
    assert url is not None
    store = PgStore(url, op_timeout=5.0)
    try:
        with store.transaction() as tx:
            rows = tx.run(
                "SELECT job, expires_at FROM repl_leases WHERE node = ? AND job LIKE ?", (node, f"shard:{TYPE}:%")
            ).fetchall()
    finally:
        store.close()
    return {int(job.rsplit(":", 1)[1]): float(expires) for job, expires in rows}


def _report(r: Run, with_store: bool) -> dict[str, tuple[str, str, float, float]]:
    """Print what the run saw: increments, samples, and the keys served twice by the fault they began in."""
    samples = r.history.samples
    found = overlaps(samples)
    per_node = {n: sum(1 for s in samples if s.node == n) for n in HOSTS}
    longest = max((v[2] for v in found.values()), default=0.0)
    print(
        f"sharding {'with' if with_store else 'without'} a store: {r.history.total} increments acknowledged "
        f"of {sum(r.history.tried.values())} tried; {len(samples)} samples {per_node}; "
        f"{len(found)} keys served by two nodes at once (longest {longest:.2f} s)"
    )
    by_fault: dict[str, list[float]] = {}
    for _a, _b, shared, since in found.values():
        during = [what for at, what in r.faults if at <= since]
        by_fault.setdefault(during[-1] if during else "before the first fault", []).append(shared)
    for what, spans in by_fault.items():
        print(f"  since {what}: {len(spans)} keys, longest {max(spans):.2f} s")
    return found


@pytest.mark.timeout(240)
@pytest.mark.parametrize("run", [True], indirect=True, ids=["store"])
def test_with_a_store_no_key_is_served_twice_and_no_acknowledged_increment_is_lost(run: Run) -> None:
    cut = _faults(run, with_store=True)
    run.stop.set()
    for t in run.threads:
        t.join(timeout=CALL_TIMEOUT + 10.0)
    found = _report(run, True)
    assert found == {}, f"keys served by two nodes at once: {dict(list(found.items())[:10])}"
    # Every acknowledged increment is in the final count, and nothing counted was never tried.
    store = PgStore(run.lease_url, op_timeout=5.0)  # type: ignore[arg-type]
    try:
        with store.transaction() as tx:
            values = dict(tx.run("SELECT key, value FROM sharding_state WHERE type = ?", (TYPE,)).fetchall())
            runs = [x for x in lease_sql.runs(tx) if x.job.startswith(f"shard:{TYPE}:")]
    finally:
        store.close()
    for key in KEYS:
        got = int(values.get(key, "0"))
        assert run.history.acked[key] <= got <= run.history.tried[key], (key, run.history.acked[key], got)
    assert overlapping_runs(runs) == []
    # The node cut from the store served nothing past its leases' expiry there.
    late = [
        (s.at, key)
        for s in cut["served_during_cut"]
        for key in s.served
        if s.at >= cut["expiry"].get(shard_of(key, SHARDS), float("inf"))
    ]
    assert late == [], f"{cut['victim']} served past its lease's expiry: {late[:5]}"
    print(f"cut from the store: {len(cut['served_during_cut'])} samples of {cut['victim']} still serving, none late")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("run", [False], indirect=True, ids=["no_store"])
def test_without_a_store_the_run_completes_and_reports_keys_served_twice(run: Run) -> None:
    _faults(run, with_store=False)
    run.stop.set()
    for t in run.threads:
        t.join(timeout=CALL_TIMEOUT + 10.0)
    found = _report(run, False)
    for key, (a, b, shared, _since) in sorted(found.items())[:5]:
        print(f"  e.g. {key}: on {a} and {b} for {shared:.2f} s")
    assert run.history.total > 0 and all(run.history.acked.values())
