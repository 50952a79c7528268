"""ioq_config: the seed's ioq_config_tests, plus the setters' validation."""

import logging

import pytest

from actors.config import Config
from actors.ioq import ioq_config
from actors.ioq.ioq_config import (
    DEFAULT_CLASS_PRIORITIES,
    DISPATCH_FD_HASH,
    DISPATCH_SERVER_PER_SCHEDULER,
    Ioq2Settings,
    ShardStringError,
    affects_ioq,
    build_class_priorities,
    build_shard_priorities,
    build_user_priorities,
    check_priority,
    dispatch_strategy,
    ioq2_enabled,
    ioq_classes,
    is_valid_class,
    parse_shard_string,
    prioritize,
    read_settings,
    to_float,
)
from actors.ioq.request import IoqRequest

pytestmark = pytest.mark.timeout(10)

USERS_CONFIG = [("bar", "2.4"), ("baz", "4.0"), ("foo", "1.2")]
CLASSES_CONFIG = [("view_compact", "2.4"), ("db_update", "1.9")]
SHARDS_CONFIG = [
    (("shards/00000000-1fffffff/foo/pizza_db", "db_update"), 5.0),
    (("shards/00000000-1fffffff/foo/pizza_db", "view_update"), 7.0),
]
PIZZA = "shards/00000000-1fffffff/foo/pizza_db"


@pytest.mark.parametrize(
    "user, shard, class_, priority",
    [
        # {User, Shard, Class, UP * SP * CP}
        ("foo", PIZZA, "db_update", 1.2 * 5.0 * 1.9),
        ("foo", PIZZA, "view_update", 1.2 * 7.0 * 1.0),
        ("foo", PIZZA, "view_compact", 1.2 * 1.0 * 2.4),
        ("foo", PIZZA, "db_compact", 1.2 * 1.0 * 0.0001),
        ("foo", PIZZA, "internal_repl", 1.2 * 1.0 * 0.001),
        ("baz", None, "internal_repl", 4 * 1.0 * 0.001),
    ],
)
def test_priorities(user, shard, class_, priority):
    shard_p = build_shard_priorities(SHARDS_CONFIG)
    user_p = build_user_priorities(USERS_CONFIG)
    class_p = build_class_priorities(CLASSES_CONFIG)
    req = IoqRequest(user=user, shard=shard, class_=class_)
    assert prioritize(req, class_p, user_p, shard_p) == priority


@pytest.mark.parametrize("class_", ["db_update", "view_update", "view_compact", "db_compact"])
def test_parse_shard_string(class_):
    shard = "shards/00000000-1fffffff/foo/pizza_db"
    assert parse_shard_string(f"{shard}||{class_}") == (shard, class_)


def test_parse_bad_string():
    shard = "shards/00000000-1fffffff/foo/pizza_db$$$$$ASDF"
    with pytest.raises(ShardStringError) as info:
        parse_shard_string(shard)
    assert info.value.shard_string == shard
    assert shard in str(info.value)


def test_parse_shard_string_with_unknown_class():
    with pytest.raises(ShardStringError, match="unknown IOQ class 'nope'"):
        parse_shard_string("shards/0-1/foo||nope")


@pytest.mark.parametrize(
    "expected, value",
    [
        (0.0, 0),
        (0.0, "0"),
        (1.0, "1"),
        (1.0, 1),
        (7.9, 7.9),
        (7.9, "7.9"),
        (79.0, "79"),
        (123456789.0, "asdf"),
    ],
)
def test_to_float(expected, value):
    assert to_float(value, 123456789.0) == expected


@pytest.mark.parametrize("value", [None, True, b"1.0", "nan", "inf", float("nan")])
def test_to_float_falls_back_to_default(value):
    assert to_float(value) == 1.0


def test_check_simple_configs():
    """config_set_test_ / check_simple_configs: defaults, then every setter round-trips."""
    cfg = Config()
    defaults = [
        ("concurrency", "1"),
        ("resize_limit", "1000"),
        ("dedupe", "true"),
        ("scale_factor", "2.0"),
        ("max_priority", "10000.0"),
        ("enabled", "false"),
        ("dispatch_strategy", DISPATCH_SERVER_PER_SCHEDULER),
    ]
    for key, default in defaults:
        assert cfg.get("ioq2", key, default) == default
        assert ioq_config.IOQ2_DEFAULTS[key] == default
    settings = read_settings(cfg)
    assert (settings.concurrency, settings.resize_limit, settings.dedupe) == (1, 1000, True)
    assert (settings.scale_factor, settings.max_priority) == (2.0, 10000.0)
    assert ioq2_enabled(cfg) is False
    assert dispatch_strategy(cfg) == DISPATCH_SERVER_PER_SCHEDULER

    set_tests = [
        ("set_concurrency", 9, "9"),
        ("set_resize_limit", 8888, "8888"),
        ("set_dedupe", False, "false"),
        ("set_scale_factor", 3.14, "3.14"),
        ("set_max_priority", 99999.99, "99999.99"),
        ("set_enabled", True, "true"),
        ("set_dispatch_strategy", DISPATCH_FD_HASH, DISPATCH_FD_HASH),
    ]
    reason = "ioq_config_tests"
    for fun, value, result in set_tests:
        getattr(ioq_config, fun)(cfg, value, reason)
        key = fun[len("set_") :]
        assert to_float(cfg.get("ioq2", key), cfg.get("ioq2", key)) == to_float(result, result)
    settings = read_settings(cfg)
    assert (settings.concurrency, settings.resize_limit, settings.dedupe) == (9, 8888, False)
    assert (settings.scale_factor, settings.max_priority) == (3.14, 99999.99)
    assert ioq2_enabled(cfg) is True
    assert dispatch_strategy(cfg) == DISPATCH_FD_HASH


def test_check_bypass_configs():
    cfg = Config()
    ioq_config.set_bypass(cfg, "interactive", True, "Bypassing interactive")
    assert cfg.get_boolean("ioq2.bypass", "interactive", False) is True
    assert read_settings(cfg).bypass == frozenset({"interactive"})


@pytest.mark.parametrize(
    "fun, args, match",
    [
        ("set_concurrency", (0,), "concurrency"),
        ("set_concurrency", (-1,), "concurrency"),
        ("set_concurrency", ("foo",), "concurrency"),
        ("set_concurrency", (2.0,), "concurrency"),
        ("set_resize_limit", (True,), "resize_limit"),
        ("set_dedupe", ("true",), "dedupe"),
        ("set_enabled", (1,), "enabled"),
        ("set_scale_factor", (0.0,), "scale_factor"),
        ("set_scale_factor", ("2.0",), "scale_factor"),
        ("set_max_priority", (float("nan"),), "max_priority"),
        ("set_max_priority", (0.0,), "max_priority"),
        ("set_dispatch_strategy", ("round_robin",), "Dispatch strategy must be one of"),
        ("set_bypass", ("nope", True), "unknown IOQ class"),
        ("set_bypass", ("interactive", "true"), "bypass"),
        ("set_class_config", ("nope", 1.0), "unknown IOQ class"),
        ("set_class_config", ("interactive", "3.2"), "must be a float"),
        ("set_class_config", ("interactive", -1.0), ">= 0"),
        ("set_user_config", ("", 1.0), "user"),
        ("set_user_config", ("foo", None), "must be a float"),
        ("set_shard_config", ("shards/0-1/foo", "nope", 1.0), "unknown IOQ class"),
        ("set_shard_config", ("shards/0-1/foo", "db_update", "x"), "must be a float"),
    ],
)
def test_setters_reject_bad_values(fun, args, match):
    cfg = Config()
    with pytest.raises(ValueError, match=match):
        getattr(ioq_config, fun)(cfg, *args, "reason")
    assert cfg.to_dict() == {}


def test_setters_need_a_reason():
    with pytest.raises(ValueError, match="reason"):
        ioq_config.set_concurrency(Config(), 2, "")


def test_set_class_user_shard_and_db_configs_feed_check_priority():
    cfg = Config()
    ioq_config.set_class_config(cfg, "db_update", 1.5, "r")
    ioq_config.set_user_config(cfg, b"foo", 2.0, "r")
    ioq_config.set_shard_config(cfg, "shards/00000000-1fffffff/foo/pizza_db.1503945430", "db_update", 3.0, "r")
    assert cfg.get("ioq2.shards", "shards/00000000-1fffffff/foo/pizza_db||db_update") == "3.0"
    got = check_priority(cfg, "db_update", "foo", "shards/00000000-1fffffff/foo/pizza_db.1503945430")
    assert got == pytest.approx(1.5 * 2.0 * 3.0)

    shards = {"foo/bar": ["shards/00000000-7fffffff/foo/bar.1", "shards/80000000-ffffffff/foo/bar.1"]}
    ioq_config.set_db_config(cfg, "foo/bar", "view_update", 0.8, "Build that view", shards=shards.__getitem__)
    table = build_shard_priorities(cfg)
    assert table[("shards/00000000-7fffffff/foo/bar", "view_update")] == 0.8
    assert table[("shards/80000000-ffffffff/foo/bar", "view_update")] == 0.8


def test_default_class_priorities():
    table = build_class_priorities(Config())
    assert table == dict(DEFAULT_CLASS_PRIORITIES)
    assert ioq_classes() == [
        "customer",
        "internal_repl",
        "view_compact",
        "db_compact",
        "low",
        "db_meta",
        "db_update",
        "view_update",
        "other",
        "interactive",
    ]
    assert is_valid_class("db_compact") and not is_valid_class("nope") and not is_valid_class(None)


def test_bad_config_entries_are_logged_and_skipped(caplog):
    cfg = Config(
        {
            "ioq2.shards": {"no-class-here": "2.0", "shards/0-1/foo||db_update": "2.0"},
            "ioq2.classes": {"bogus": "5.0", "interactive": "junk"},
            "ioq2": {"concurrency": "many", "resize_limit": "0", "scale_factor": "-1", "dedupe": "maybe"},
        }
    )
    with caplog.at_level(logging.ERROR, logger="actors.ioq.ioq_config"):
        settings = read_settings(cfg)
    assert settings.shard_p == {("shards/0-1/foo", "db_update"): 2.0}
    assert "bogus" not in settings.class_p
    assert settings.class_p["interactive"] == 1.0  # non-numbers fall back to 1.0
    assert (settings.concurrency, settings.resize_limit, settings.scale_factor) == (1, 1000, 2.0)
    assert settings.dedupe is True
    assert "no-class-here" in caplog.text and "bogus" in caplog.text


def test_settings_defaults_are_the_seed_defaults():
    s = Ioq2Settings()
    assert (s.concurrency, s.resize_limit, s.dedupe, s.scale_factor, s.max_priority) == (
        1,
        1000,
        True,
        2.0,
        10000.0,
    )


@pytest.mark.parametrize(
    "section, expected",
    [("ioq", True), ("ioq2", True), ("ioq2.classes", True), ("ioq.bypass", True), ("smoosh", False), ("ioqx", False)],
)
def test_affects_ioq(section, expected):
    assert affects_ioq(section) is expected
