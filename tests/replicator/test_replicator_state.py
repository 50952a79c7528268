"""`SchedulerState` beyond the seed's cases: the gen_server behaviour end to end.

A tiny driver plays the actor layer: it answers `StartJob` with a process
handle and records `StopJob`; time is a `FakeClock`, never sleep.
"""

from __future__ import annotations

import itertools

import pytest

from actors.clock import FakeClock
from actors.config import Config
from actors.replicator.records import MAX_BACKOFF, STARTING, Rep
from actors.replicator.scheduler_state import SchedulerState, StartJob, StopJob
from actors.replicator.settings import InvalidSetting, Settings
from actors.stats import Stats

pytestmark = pytest.mark.timeout(30)


class Driver:
    def __init__(self, settings: Settings, start: float = 1_000_000.0):
        self.clock = FakeClock(start)
        self.stats = Stats()
        self.state = SchedulerState(settings, self.stats)
        self.pids = itertools.count(1)
        self.live: dict = {}  # pid -> job id
        self.fail_next_start: dict = {}

    def now(self):
        return self.clock.now()

    def apply(self, effects):
        for effect in effects:
            if isinstance(effect, StopJob):
                assert effect.pid in self.live, f"stop of unknown pid {effect.pid}"
                del self.live[effect.pid]
            else:
                assert isinstance(effect, StartJob)
                assert effect.job_id not in self.live.values(), "job started twice"
                if effect.job_id in self.fail_next_start:
                    self.state.job_start_failed(effect.job_id, self.fail_next_start.pop(effect.job_id), self.now())
                    continue
                pid = f"pid{next(self.pids)}"
                self.live[pid] = effect.job_id
                self.state.job_started(effect.job_id, pid, self.now())

    def add(self, rep):
        self.apply(self.state.add_job(rep, self.now()))

    def reschedule(self):
        self.apply(self.state.reschedule(self.now()))

    def exit(self, job_id, reason):
        pid = next(p for p, j in self.live.items() if j == job_id)
        del self.live[pid]
        self.apply(self.state.job_exited(pid, reason, self.now()))

    def gauge(self, name):
        return self.stats.gauge(f"couch_replicator.jobs.{name}")


def rep(i, db="db1", continuous=True, **options):
    return Rep(
        id=f"r{i}",
        source=f"src{i}",
        target=f"tgt{i}",
        db_name=db,
        doc_id=f"doc{i}",
        options={"continuous": continuous, **options},
    )


def test_add_job_starts_at_once_only_while_the_table_is_small():
    # The seed's cheap check: total jobs (this one included) < max_jobs.
    d = Driver(Settings(max_jobs=2))
    for i in range(3):
        d.add(rep(i))
    assert sorted(d.live.values()) == ["r0"]
    assert d.state.job_summary("r2")["state"] == "pending"
    d.reschedule()
    assert sorted(d.live.values()) == ["r0", "r1"]
    assert d.stats.counter("couch_replicator.jobs.adds") == 3
    assert d.gauge("total") == 3


def test_add_job_with_same_id_replaces_and_stops_the_old_one():
    d = Driver(Settings(max_jobs=5))
    d.add(rep(1))
    (old_pid,) = d.live
    d.add(rep(1, options_changed=True))
    assert old_pid not in d.live
    assert d.state.total_jobs() == 1
    assert d.state.rep_state("r1").options["options_changed"] is True


def test_remove_job_stops_it_and_unknown_is_ignored():
    d = Driver(Settings(max_jobs=5))
    d.add(rep(1))
    d.apply(d.state.remove_job("r1", d.now()))
    assert d.live == {}
    assert d.state.rep_state("r1") is None
    assert d.state.remove_job("nope", d.now()) == []
    assert d.stats.counter("couch_replicator.jobs.removes") == 1


def test_normal_exit_removes_the_completed_job():
    d = Driver(Settings(max_jobs=5))
    d.add(rep(1, continuous=False))
    d.exit("r1", "normal")
    assert d.state.job("r1") is None
    assert d.gauge("running") == 0


def test_permanent_crash_backs_off_then_retries():
    d = Driver(Settings(max_jobs=5, backoff_interval=10, health_threshold=120))
    d.add(rep(1))
    d.clock.advance(1)
    d.exit("r1", "boom")
    summary = d.state.job_summary("r1")
    assert summary["state"] == "crashing"
    assert summary["error_count"] == 1
    assert summary["info"] == "boom"
    assert d.gauge("crashed") == 1
    d.clock.advance(9)
    d.reschedule()
    assert d.live == {}, "retried before its back-off ran out"
    d.clock.advance(1)
    d.reschedule()
    assert list(d.live.values()) == ["r1"]
    # crashing again quickly doubles the back-off
    d.clock.advance(1)
    d.exit("r1", "boom")
    assert d.state.job_summary("r1")["error_count"] == 2
    d.clock.advance(19)
    d.reschedule()
    assert d.live == {}
    d.clock.advance(1)
    d.reschedule()
    assert list(d.live.values()) == ["r1"]


def test_backoffs_name_each_held_back_job_and_when_it_may_start():
    d = Driver(Settings(max_jobs=5, backoff_interval=10, health_threshold=120))
    d.add(rep(1))
    d.add(rep(2))
    d.clock.advance(1)
    crash_time = d.now()
    d.exit("r1", "boom")
    assert d.state.backoffs() == [{"id": "r1", "crashes": 1, "backoff": 10.0, "retry_at": crash_time + 10}]
    d.clock.advance(9)
    d.reschedule()
    assert d.live and "r1" not in d.live.values()  # still held back, as the reply said
    d.clock.advance(1)
    d.reschedule()
    assert "r1" in d.live.values()
    assert d.state.backoffs() == [], "a running job is not held back"
    d.clock.advance(1)
    crash_time = d.now()
    d.exit("r1", "boom")
    assert d.state.backoffs() == [{"id": "r1", "crashes": 2, "backoff": 20.0, "retry_at": crash_time + 20}]


def test_healthy_run_before_a_crash_resets_the_backoff():
    d = Driver(Settings(max_jobs=5, backoff_interval=10, health_threshold=5))
    d.add(rep(1))
    d.clock.advance(60)
    effects = d.state.job_exited(next(iter(d.live)), "late crash", d.now())
    d.live.clear()
    # crashed long after starting: zero consecutive crashes, restarted at once
    d.apply(effects)
    assert list(d.live.values()) == ["r1"]


def test_transient_crash_removes_the_job():
    d = Driver(Settings(max_jobs=5))
    d.add(rep(1, db=None))
    d.exit("r1", "boom")
    assert d.state.total_jobs() == 0


def test_crash_frees_a_slot_for_a_pending_job_when_the_table_is_small():
    d = Driver(Settings(max_jobs=2))
    d.add(rep(1))
    d.add(rep(2))
    d.add(rep(3))
    d.reschedule()
    assert sorted(d.live.values()) == ["r1", "r2"]
    d.clock.advance(1)
    d.exit("r1", "boom")
    # 3 jobs >= max_jobs 2: the seed does not scan the table on a crash
    assert sorted(d.live.values()) == ["r2"]
    d.state.set_max_jobs(4)
    d.exit("r2", "boom")
    assert sorted(d.live.values()) == ["r3"]


def test_start_failure_is_recorded_as_a_crash():
    d = Driver(Settings(max_jobs=2))
    d.fail_next_start["r1"] = ("db_not_found", "could not open src1")
    d.add(rep(1))
    job = d.state.get_job("r1")
    assert job.pid is None
    assert job.history[0][0] == ("crashed", ("db_not_found", "could not open src1"))
    assert d.state.job_summary("r1")["info"] == "db_not_found: could not open src1"


def test_a_job_that_keeps_failing_to_start_backs_off_exponentially():
    # Seed: the job starts (update_state_started) and its init then fails,
    # arriving as a crash: history [crashed, started, ...], so every failed
    # start is a consecutive crash and the back-off doubles each time.  Each
    # retry here comes as soon as a reschedule (every 60 s) is allowed to.
    d = Driver(Settings(max_jobs=2, health_threshold=120, backoff_interval=30))
    attempts = []
    d.fail_next_start["r1"] = ("db_not_found", "could not open src1")
    d.add(rep(1))
    attempts.append(d.now())
    for _ in range(2000):
        if len(attempts) == 8:
            break
        d.clock.advance(60)
        d.fail_next_start["r1"] = ("db_not_found", "could not open src1")
        d.reschedule()
        if "r1" not in d.fail_next_start:  # it was tried
            attempts.append(d.now())
            assert d.state.job_summary("r1")["error_count"] == len(attempts)
            assert d.state.job_summary("r1")["state"] == "crashing"
    assert len(attempts) == 8
    for n, (before, after) in enumerate(zip(attempts, attempts[1:]), start=1):
        assert after - before >= 30 * 2 ** (n - 1)
    history = d.state.get_job("r1").history
    assert [e[0] for e in history[:2]] == [("crashed", ("db_not_found", "could not open src1")), "started"]
    assert d.stats.counter("couch_replicator.jobs.starts") == 8
    assert d.stats.counter("couch_replicator.jobs.crashes") == 8


def test_a_failed_start_goes_to_the_back_of_the_pending_queue():
    # Its failed start counts as its latest start (seed: last_started), so a
    # job that never ran is not ahead of jobs waiting since before it.
    d = Driver(Settings(max_jobs=1, max_churn=1, backoff_interval=1))
    d.add(rep(1))  # runs
    d.clock.advance(1)
    d.add(rep(2))  # waits
    d.clock.advance(1)
    d.fail_next_start["r3"] = "boom"
    d.state.set_max_jobs(2)
    d.add(rep(3))  # table 3 >= 2: not started at add; r2 is older anyway
    d.reschedule()  # starts r2
    d.clock.advance(1)
    d.state.set_max_jobs(3)
    d.reschedule()  # starts r3, which fails
    assert d.state.job_summary("r3")["state"] == "crashing"
    d.clock.advance(10)
    d.state.set_max_jobs(2)
    d.exit("r1", "boom")  # r1 crashes: 3 jobs >= 2, no refill; r1 backs off
    d.clock.advance(10)
    d.reschedule()  # one slot: r1 (last started t+0) before r3 (failed start, t+3)
    assert sorted(d.live.values()) == ["r1", "r2"]


def test_rate_limited_job_restarts_with_lower_options():
    d = Driver(Settings(max_jobs=2, backoff_interval=1))
    d.add(rep(1, worker_processes=8, worker_batch_size=50, checkpoint_interval=30000, http_connections=20))
    d.clock.advance(1)
    d.exit("r1", MAX_BACKOFF)
    d.clock.advance(5)
    effects = d.state.reschedule(d.now())
    (start,) = [e for e in effects if isinstance(e, StartJob)]
    assert start.rep.options["worker_processes"] == 2
    assert start.rep.options["worker_batch_size"] == 50  # never raised
    assert start.rep.options["checkpoint_interval"] == 5000
    assert start.rep.options["http_connections"] == 5
    assert d.state.rep_state("r1").options["worker_processes"] == 2


def test_reads_and_json_views():
    d = Driver(Settings(max_jobs=1))
    d.add(rep(1, db="a"))
    d.add(rep(2, db="a"))
    d.add(rep(3, db="b"))
    d.reschedule()
    assert sorted(d.state.find_jobs_by_dbname("a")) == ["r1", "r2"]
    assert d.state.find_jobs_by_doc("a", "doc2") == ["r2"]
    view = d.state.job("r1")
    assert view["database"] == "a" and view["pid"] is not None
    assert [e["type"] for e in view["history"]] == ["started", "added"]
    assert len(d.state.jobs()) == 3
    assert d.state.job_summary("r1")["state"] == "running"
    assert d.state.job_summary("missing") is None
    assert d.state.health_threshold() == 120


def test_json_views_join_a_base_and_extension_id_as_the_seed_does():
    # job_ejson: {BaseID, Ext} = Job#job.id, id = BaseID ++ Ext.
    d = Driver(Settings(max_jobs=2, backoff_interval=1))
    r = Rep(id=("abc", "+continuous"), source="s", target="t", db_name="db1", options={"continuous": True})
    d.add(r)
    assert d.state.job(r.id)["id"] == "abc+continuous"
    assert [j["id"] for j in d.state.jobs()] == ["abc+continuous"]
    d.clock.advance(1)
    d.exit(r.id, "boom")
    assert [b["id"] for b in d.state.backoffs()] == ["abc+continuous"]


def test_history_is_trimmed_to_max_history():
    d = Driver(Settings(max_jobs=1, max_churn=1, max_history=4))
    d.add(rep(1))
    d.add(rep(2))
    for _ in range(10):
        d.clock.advance(1)
        d.reschedule()
    assert all(len(j.history) <= 4 for j in d.state.all_jobs())


def test_stats_gauges_of_the_seed():
    d = Driver(Settings(max_jobs=1, backoff_interval=100))
    d.add(rep(1))
    d.add(rep(2))
    d.reschedule()
    d.clock.advance(10)
    d.state.update_running_jobs_stats(d.now())
    assert d.gauge("running") == 1 and d.gauge("pending") == 1 and d.gauge("crashed") == 0
    assert d.gauge("avg_running") == 10 and d.gauge("avg_pending") == 10
    d.exit("r1", "boom")
    assert d.gauge("crashed") == 1 and d.gauge("running") == 0
    assert d.stats.counter("couch_replicator.jobs.crashes") == 1
    assert d.stats.counter("couch_replicator.jobs.starts") == 1


def test_live_settings_are_validated_and_bad_values_not_applied():
    d = Driver(Settings())
    assert d.state.handle_config_change("replicator", "max_jobs", "7") is True
    assert d.state.settings.max_jobs == 7
    assert d.state.handle_config_change("replicator", "max_jobs", "-1") is False
    assert d.state.handle_config_change("replicator", "max_churn", "lots") is False
    assert d.state.handle_config_change("replicator", "interval", "0") is False
    assert d.state.handle_config_change("replicator", "max_history", "0") is False
    assert d.state.settings.max_jobs == 7
    assert d.state.settings.interval == 60000
    assert d.state.handle_config_change("replicator", "max_history", "3") is True
    assert d.state.handle_config_change("replicator", "max_jobs", None) is True
    assert d.state.settings.max_jobs == 500
    assert d.state.handle_config_change("other", "max_jobs", "1") is False
    with pytest.raises(InvalidSetting, match="max_churn"):
        d.state.set_max_churn(-3)
    assert d.state.handle_config_change("replicator.shares", "db1", "5000") is False
    assert d.state.handle_config_change("replicator.shares", "db1", "900") is True
    assert d.state.fair_share.shares("db1") == 900


def test_settings_from_config_and_listener_wiring():
    cfg = Config(
        {
            "replicator": {"max_jobs": "3", "interval": "500", "backoff_interval": "0.1"},
            "replicator.shares": {"big": "900"},
        }
    )
    state = SchedulerState.from_config(cfg, Stats())
    assert state.settings.max_jobs == 3
    assert state.interval_seconds() == 0.5
    assert state.fair_share.shares("big") == 900
    cfg.listen(lambda s, k, v, _p: state.handle_config_change(s, k, v))
    cfg.set("replicator", "max_churn", "2")
    cfg.set("replicator", "max_churn", "-2")
    assert state.settings.max_churn == 2
    with pytest.raises(InvalidSetting, match="max_jobs"):
        Settings.from_config(Config({"replicator": {"max_jobs": "x"}}))


def test_job_started_must_follow_a_start_effect():
    d = Driver(Settings(max_jobs=0))
    d.add(rep(1))
    with pytest.raises(KeyError, match="r1"):
        d.state.job_started("r1", "pidX", d.now())
    with pytest.raises(ValueError):
        d.state.job_started("r1", STARTING, d.now())


def test_unknown_down_is_ignored():
    d = Driver(Settings())
    assert d.state.job_exited("ghost", "killed", d.now()) == []


@pytest.mark.timeout(60)
def test_fifty_jobs_five_slots_all_make_progress_and_none_runs_twice():
    d = Driver(Settings(max_jobs=5, max_churn=5, backoff_interval=1))
    for i in range(50):
        d.add(rep(i))
    runs = {f"r{i}": 0 for i in range(50)}
    for _cycle in range(30):
        d.clock.advance(60)
        d.reschedule()
        assert len(d.live) <= 5
        assert len(set(d.live.values())) == len(d.live)
        for job_id in d.live.values():
            runs[job_id] += 1
    assert all(n >= 2 for n in runs.values()), runs
