"""The seed's ioq_kv_tests, on what replaced ``ioq_kv``: IOQ1's custom channels.

The seed keeps ``{Account, DbName} -> ChannelName`` in ``ioq_kv`` (a module
compiled at run time) behind ``ioq_server:add_channel/3``, ``rem_channel/2``
and ``list_custom_channels/0``, and ``channel_name/1`` reads it with the
account as default.  `Ioq1State` keeps the same map; these are the seed's
two PropEr properties against it: a stateful run of init/get/put/delete
checked against a model dict, and put-then-get of almost any value.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.ioq.server1_state import Ioq1State

pytestmark = pytest.mark.timeout(30)

ACCOUNTS = ["foo", "bar", "other"]
DBS = ["db", "pizza_db", "my/db"]

keys = st.tuples(st.sampled_from(ACCOUNTS), st.sampled_from(DBS))
# the seed's almost_any(): integers, floats, atoms, binaries, tuples and lists of them
almost_any = st.recursive(
    st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=8), st.binary(max_size=8)),
    lambda inner: st.one_of(st.tuples(inner, inner), st.lists(inner, max_size=3)),
    max_leaves=6,
)
commands = st.lists(
    st.one_of(
        st.just(("init",)),
        st.tuples(st.just("get"), keys),
        st.tuples(st.just("put"), keys, almost_any),
        st.tuples(st.just("delete"), keys),
    ),
    max_size=40,
)


def get(state: Ioq1State, key):
    """``ioq_kv:get(Key)``: the stored value, or undefined (None)."""
    return dict(state.list_custom_channels()).get(key)


def routed(state: Ioq1State, key):
    """The channel a request on that database lands in (``channel_name/1``)."""
    account, db = key
    shard = f"shards/0-1/{db}" if account == "other" else f"shards/0-1/{account}/{db}"
    return state.make_request("fd", ("pread_iolist", 0), ("interactive", shard), 0.0).channel


@settings(max_examples=200, deadline=None)
@given(commands)
def test_prop_ioq_kvs(cmds):
    state = Ioq1State()
    model: dict = {}
    for cmd in cmds:
        if cmd[0] == "init":
            # ioq_kv:init/0 recompiles what is stored: a restarted server keeps the map
            state = Ioq1State(custom_channels=dict(state.list_custom_channels()))
        elif cmd[0] == "get":
            assert get(state, cmd[1]) == model.get(cmd[1])
        elif cmd[0] == "put":
            assert state.add_channel(*cmd[1], cmd[2]) is None
            model[cmd[1]] = cmd[2]
        else:
            assert state.rem_channel(*cmd[1]) is None
            model.pop(cmd[1], None)
        assert sorted(state.list_custom_channels(), key=repr) == sorted(model.items(), key=repr)
    for key in [(a, d) for a in ACCOUNTS for d in DBS]:
        if key[0] == "other" and "/" in key[1]:
            continue  # a shard name cannot say "no account" and "a/b" at once
        assert routed(state, key) == model.get(key, key[0])


@settings(max_examples=200, deadline=None)
@given(keys, almost_any)
def test_prop_ioq_kvs_almost_any(key, value):
    state = Ioq1State()
    state.add_channel(*key, value)
    assert get(state, key) == value
