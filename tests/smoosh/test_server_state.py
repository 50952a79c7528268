"""smoosh_server's logic: channel table, routing, staleness, events."""

from __future__ import annotations

from actors.config import Config
from actors.smoosh.effects import CloseChannel, EnqueueToChannel, StartChannel
from actors.smoosh.policy import INDEX_CLEANUP
from actors.smoosh.server_state import ObjectInfo, ServerState, compute_priority, db_event_keys
from actors.smoosh.settings import ChannelSettings, ServerSettings

MB = 1024 * 1024


def running_server(cfg=None):
    server = ServerState(ServerSettings.from_config(cfg or Config()))
    for effect in server.create_missing_channels():
        server.channel_started(effect.name, f"pid-{effect.name}")
    return server


def test_creates_sorted_default_channels():
    server = ServerState(ServerSettings())
    assert [e.name for e in server.create_missing_channels()] == [
        "index_cleanup",
        "ratio_dbs",
        "ratio_views",
        "slack_dbs",
        "slack_views",
        "upgrade_dbs",
        "upgrade_views",
    ]


def test_find_channel_first_non_zero():
    server = running_server()
    table = {("ratio_dbs", "db"): 0, ("slack_dbs", "db"): 7e8, ("upgrade_dbs", "db"): 1}
    prio = lambda ch, key: table.get((ch, key), 0)
    assert server.find_channel("db", prio, now=0.0) == ("slack_dbs", 7e8)
    assert server.find_channel("other", prio, now=0.0) is None
    # views and cleanups only go to their own channels
    seen = []
    server.find_channel(("db", "idx"), lambda ch, k: seen.append(ch) or 0, 0.0)
    server.find_channel((INDEX_CLEANUP, "db"), lambda ch, k: seen.append(ch) or 0, 0.0)
    assert seen == ["ratio_views", "slack_views", "upgrade_views", "index_cleanup"]


def test_priority_errors_skip_the_channel():
    server = running_server()

    def prio(ch, key):
        if ch == "ratio_dbs":
            raise OSError("disk on fire")
        return 3

    assert server.find_channel("db", prio, 0.0) == ("slack_dbs", 3)


def test_staleness_throttles_enqueue():
    server = running_server()  # staleness 5 minutes
    prio = lambda ch, key: 3
    assert server.enqueue_request("db", prio, now=100.0) == [EnqueueToChannel("ratio_dbs", "db", 3)]
    assert server.should_enqueue("db", 200.0) is None
    assert server.enqueue_request("db", prio, now=200.0) == []
    assert server.should_enqueue("db", 400.5) == "db"
    assert server.handle_db_event("db", "local_updated", 300.0) == []
    assert server.clean_access(now=401.0) == 1
    assert server.handle_db_event("db", "local_updated", 401.0) == ["db"]


def test_in_flight_enqueue_is_deduplicated():
    server = running_server()
    assert server.begin_enqueue("db")
    assert not server.begin_enqueue("db")
    server.end_enqueue("db")
    assert server.begin_enqueue("db")


def test_ignored_dbs():
    server = running_server(Config({"smoosh.ignore": {"skip": "true", "keep": "false"}}))
    assert server.find_channel("skip", lambda ch, k: 3, 0.0) is None
    assert server.find_channel(("skip", "idx"), lambda ch, k: 3, 0.0) is None
    assert server.find_channel("keep", lambda ch, k: 3, 0.0) == ("ratio_dbs", 3)


def test_db_events():
    assert db_event_keys("db", "local_updated") == ["db"]
    assert db_event_keys("db", ("index_commit", "idx")) == [("db", "idx")]
    assert db_event_keys("db", ("index_collator_upgrade", "idx")) == [("db", "idx")]
    assert db_event_keys("db", "deleted") == []


def test_config_change_closes_and_creates_channels():
    cfg = Config()
    server = running_server(cfg)
    cfg.set("smoosh", "db_channels", "mychan1")
    effects = server.config_changed(ServerSettings.from_config(cfg))
    assert effects == [StartChannel("mychan1")]
    server.channel_started("mychan1", "pid-m")
    cfg.delete("smoosh", "db_channels")
    assert server.config_changed(ServerSettings.from_config(cfg)) == [CloseChannel("mychan1", "pid-m")]


def test_dead_channel_is_recreated():
    server = running_server()
    assert server.channel_died("pid-ratio_dbs", "killed") == [StartChannel("ratio_dbs")]
    assert server.channel_died("unknown", "killed") == [StartChannel("ratio_dbs")]


def test_status_sorted_and_empty_when_unpublished():
    server = running_server()
    status = server.status({"ratio_dbs": {"active": 1, "starting": 0, "waiting": {"size": 0}}})
    assert list(status)[:2] == ["index_cleanup", "ratio_dbs"]
    assert status["ratio_dbs"]["active"] == 1 and status["slack_dbs"] == {}


class FakeSource:
    def __init__(self, infos, cleanup=()):
        self.infos = infos
        self.cleanup = set(cleanup)

    def object_info(self, key):
        return self.infos.get(key)

    def needs_cleanup(self, db):
        return db in self.cleanup


def test_compute_priority():
    src = FakeSource(
        {"db": ObjectInfo(10 * MB, 3 * MB, changes=5), ("db", "v"): ObjectInfo(10 * MB, 3 * MB, changes=0)},
        cleanup={"gone"},
    )
    ratio = ChannelSettings(name="ratio_dbs", min_changes=3)
    assert compute_priority(ratio, "db", src) == 3.3125  # quantized 3.333...
    assert compute_priority(ratio, ("db", "v"), src) == 3.3125  # min_changes is for databases
    assert compute_priority(ChannelSettings(name="x", min_changes=6), "db", src) == 0
    assert compute_priority(ratio, "missing", src) == 0
    assert compute_priority(ratio, (INDEX_CLEANUP, "gone"), src) == 1
    assert compute_priority(ratio, (INDEX_CLEANUP, "db"), src) == 0
