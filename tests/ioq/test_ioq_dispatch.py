"""Dispatch strategies and request routing."""

import os
import random
import zlib

import pytest

from actors.config import Config
from actors.ioq.dispatch import (
    ROUTE_BYPASS,
    ROUTE_IOQ1,
    ROUTE_IOQ2,
    ROUTE_OSQ,
    choose_server,
    current_cpu,
    fd_hash,
    route,
    server_name,
    server_names,
    server_per_scheduler,
)

pytestmark = pytest.mark.timeout(10)


def test_server_names():
    assert server_name(1) == "ioq_server_1"
    assert server_names(3) == ["ioq_server_1", "ioq_server_2", "ioq_server_3"]


def test_server_per_scheduler_uses_the_callers_cpu():
    assert [choose_server("server_per_scheduler", 4, cpu=c) for c in range(6)] == [1, 2, 3, 4, 1, 2]
    assert server_per_scheduler(7, 2, {7: 1, 9: 2}) == 1
    assert server_per_scheduler(3, 2, {7: 1}) == 2
    with pytest.raises(ValueError, match="cpu"):
        choose_server("server_per_scheduler", 4)


def test_unknown_strategy_behaves_as_server_per_scheduler():
    assert choose_server("bogus", 4, cpu=2) == 3


def test_fd_hash_is_stable_and_in_range():
    ids = [fd_hash(f"file-{i}", 5) for i in range(200)]
    assert set(ids) == {1, 2, 3, 4, 5}
    assert fd_hash("file-1", 5) == fd_hash("file-1", 5) == choose_server("fd_hash", 5, fd="file-1")
    assert fd_hash(b"x", 3) == fd_hash("x", 3)
    assert fd_hash(12345, 3) in (1, 2, 3)
    # CRC-32 does not depend on PYTHONHASHSEED, so every process agrees
    assert fd_hash("shards/0-1/foo.couch", 7) == 1 + zlib.crc32(b"shards/0-1/foo.couch") % 7


def test_random_and_single_server():
    rng = random.Random(3)
    ids = {choose_server("random", 4, rng=rng) for _ in range(200)}
    assert ids == {1, 2, 3, 4}
    with pytest.raises(ValueError, match="rng"):
        choose_server("random", 4)
    assert choose_server("single_server", 8, cpu=5) == 1


@pytest.mark.parametrize("bad", [0, -1, 1.0, True])
def test_bad_server_counts(bad):
    with pytest.raises(ValueError, match="num_servers"):
        choose_server("single_server", bad)


def test_current_cpu_is_one_we_may_run_on():
    assert current_cpu() in os.sched_getaffinity(0)


def test_current_cpu_follows_pinning():
    allowed = sorted(os.sched_getaffinity(0))
    pid = os.getpid()
    try:
        os.sched_setaffinity(pid, {allowed[-1]})
        assert current_cpu() == allowed[-1]
    finally:
        os.sched_setaffinity(pid, allowed)


def test_route():
    cfg = Config()
    assert route(cfg, ("prompt", ["x"]), ("interactive", "s")) == ROUTE_OSQ
    assert route(cfg, ("data", 1), None) == ROUTE_OSQ
    assert route(cfg, ("pread", 0, 1), ("interactive", "shards/0-1/a/b")) == ROUTE_IOQ1
    cfg.set("ioq.bypass", "interactive", "true")
    assert route(cfg, ("pread", 0, 1), ("interactive", "shards/0-1/a/b")) == ROUTE_BYPASS
    cfg.set("ioq2", "enabled", "true")
    assert route(cfg, ("pread", 0, 1), ("interactive", "shards/0-1/a/b")) == ROUTE_IOQ2
    cfg.set("ioq2.bypass", "interactive", "true")
    assert route(cfg, ("pread", 0, 1), ("interactive", "shards/0-1/a/b")) == ROUTE_BYPASS
    assert route(cfg, ("pread", 0, 1), None) == ROUTE_IOQ2
    cfg.set("ioq2.bypass", "other", "garbage")
    assert route(cfg, ("pread", 0, 1), None) == ROUTE_IOQ2
    with pytest.raises(ValueError, match="dimensions"):
        route(cfg, ("pread", 0, 1), "interactive")
