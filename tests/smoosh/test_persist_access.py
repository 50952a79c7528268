"""smoosh_persist on real files, and the staleness access table."""

from __future__ import annotations

import math
import os

import pytest

from actors.smoosh import persist
from actors.smoosh.access import NEVER, AccessTable
from actors.smoosh.policy import INDEX_CLEANUP, PriorityQueue

INF = math.inf


def queue(entries):
    return PriorityQueue.from_map(entries, 9999)


def test_write_read_round_trip_with_tuple_keys(tmp_path):
    q = queue({"db1": 3.5, ("db1", "idx"): 2.0, (INDEX_CLEANUP, "gone"): 1})
    persist.persist(str(tmp_path), "ratio_dbs", q, active=["busy"], starting=[("db2", "v")])
    path = tmp_path / "ratio_dbs.smooshq"
    assert path.exists()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    entries = persist.read(str(path))
    # active/starting entries first, at inf
    assert list(entries)[:2] in (["busy", ("db2", "v")], [("db2", "v"), "busy"])
    assert entries == {"busy": INF, ("db2", "v"): INF, "db1": 3.5, ("db1", "idx"): 2.0, (INDEX_CLEANUP, "gone"): 1}
    restored = persist.unpersist(str(tmp_path), "ratio_dbs")
    assert {restored.out(), restored.out()} == {"busy", ("db2", "v")}
    assert restored.out() == "db1"


def test_empty_queue_deletes_the_file(tmp_path):
    persist.persist(str(tmp_path), "c", queue({"a": 1}))
    assert (tmp_path / "c.smooshq").exists()
    persist.persist(str(tmp_path), "c", PriorityQueue())
    assert not (tmp_path / "c.smooshq").exists()
    persist.persist(str(tmp_path), "c", PriorityQueue())  # deleting twice is fine


def test_disabled_persistence_neither_writes_nor_reads(tmp_path):
    persist.persist(str(tmp_path), "c", queue({"a": 1}), enabled=False)
    assert os.listdir(tmp_path) == []
    persist.persist(str(tmp_path), "c", queue({"a": 1}))
    assert len(persist.unpersist(str(tmp_path), "c", enabled=False)) == 0


def test_corrupt_file_gives_empty_queue(tmp_path, caplog):
    (tmp_path / "c.smooshq").write_bytes(b"\x83garbage")
    assert len(persist.unpersist(str(tmp_path), "c")) == 0
    assert "cannot restore" in caplog.text
    (tmp_path / "c.smooshq").write_bytes(b'{"version": 1, "entries": [[3, 1]]}')
    with pytest.raises(ValueError, match="smoosh key"):
        persist.read(str(tmp_path / "c.smooshq"))


def test_capacity_applies_on_restore(tmp_path):
    persist.persist(str(tmp_path), "c", queue({f"db{i}": i for i in range(10)}), active=["a"])
    q = persist.unpersist(str(tmp_path), "c", capacity=3)
    assert q.to_map() == {"a": INF, "db9": 9, "db8": 8}


def test_check_setup(tmp_path):
    assert persist.check_setup(str(tmp_path)) is None
    assert os.listdir(tmp_path) == []
    assert persist.check_setup(str(tmp_path / "missing"), enabled=False) is None
    message = persist.check_setup(str(tmp_path / "missing"))
    assert "state_dir" in message and "missing" in message and "write" in message


def test_bad_channel_name(tmp_path):
    with pytest.raises(ValueError, match="channel name"):
        persist.file_path(str(tmp_path), "../x")


# -- access table -----------------------------------------------------------


def test_stale_enough_and_record():
    t = AccessTable()
    assert t.last_updated("db") == NEVER
    assert t.stale_enough("db", now=0.0, staleness_sec=300)
    t.record("db", 100.0)
    assert not t.stale_enough("db", 200.0, 300)
    assert not t.stale_enough("db", 400.0, 300)
    assert t.stale_enough("db", 400.5, 300)
    # staleness 0: a second enqueue at the same instant is still too fresh
    assert not t.stale_enough("db", 100.0, 0)


def test_size_cap_and_cleaner():
    t = AccessTable(max_size=2)
    assert t.record("a", 1.0) and t.record("b", 2.0)
    assert not t.record("c", 3.0)
    assert t.record("a", 4.0)  # existing keys still update
    assert t.clean(now=10.0, staleness_sec=7.5) == 1  # b (2.0 < 2.5)
    assert len(t) == 1 and t.last_updated("a") == 4.0
    assert AccessTable.next_clean_delay(3.0, 0.5) == 4.5
    with pytest.raises(ValueError, match="jitter"):
        AccessTable.next_clean_delay(3.0, 2)
