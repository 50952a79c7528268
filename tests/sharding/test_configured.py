"""Sharded types started from a node's configuration (``[sharding] types``), as ``otpy node`` does."""

from __future__ import annotations

import pytest

from actors import Node, sharding
from actors.app import configcheck
from actors.config import Config
from actors.sharding.configured import parse_types, start_configured


@pytest.mark.timeout(5)
def test_types_are_read_as_name_equals_module_colon_class() -> None:
    assert parse_types("counter = tests.sharding.entities:Counter, cart=app.carts:Cart") == {
        "counter": ("tests.sharding.entities", "Counter"),
        "cart": ("app.carts", "Cart"),
    }
    assert parse_types("") == {}
    for bad in ("counter", "counter = mod", "a.b = mod:C", "c = :C", "c = m:C, c = m:D"):
        with pytest.raises(ValueError, match=r"\[sharding\] types"):
            parse_types(bad)
    cfg = Config({"sharding": {"types": "counter = nodots", "shards": "0"}})
    errors = configcheck.check(cfg).errors
    assert any("[sharding] types" in e for e in errors) and any("[sharding] shards" in e for e in errors)


@pytest.mark.timeout(20)
def test_a_node_starts_the_types_its_config_names() -> None:
    cfg = Config({"sharding": {"types": "counter = tests.sharding.entities:Counter", "shards": "7", "idle": "none"}})
    with Node(cfg) as node:
        assert start_configured(node) == ["counter"]
        ref = sharding.ref("counter", "k")
        assert ref.call(2) == 2 and ref.call(3) == 5
    with Node(Config({"sharding": {"types": "counter = tests.sharding.entities:Nothing"}})) as node:
        with pytest.raises(ValueError, match="cannot be loaded"):
            start_configured(node)
