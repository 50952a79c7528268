"""The request record, dimensions parsing and queue depths."""

import pytest

from actors.ioq.request import (
    BAD_MAGIC_NUM,
    IoqRequest,
    add_request_dimensions,
    dedupe_key,
    error_queue_depths,
    get_queue_depths,
    rootname,
    rw,
    shard_info,
)

pytestmark = pytest.mark.timeout(10)


def test_request_defaults_match_the_seed_record():
    req = IoqRequest()
    assert req.init_priority == 1.0
    assert req.fin_priority is None and req.class_ is None and req.from_ is None


def test_queue_depths():
    # queue_depths_test_ in ioq_server2.erl
    foo, bar = "foo", "bar"
    reqs = [
        IoqRequest(user=foo, class_="db_compact"),
        IoqRequest(user=bar, class_="db_compact"),
        IoqRequest(user=bar, class_="view_compact"),
        IoqRequest(user=foo, class_="internal_repl"),
        IoqRequest(user=bar, class_="internal_repl"),
        IoqRequest(user=bar, class_="internal_repl"),
        IoqRequest(class_="low"),
        IoqRequest(user=foo, class_="interactive"),
        IoqRequest(user=foo, class_="interactive"),
        IoqRequest(user=foo, class_="db_update"),
        IoqRequest(user=foo, class_="view_update"),
        IoqRequest(user=foo, class_="view_update"),
        IoqRequest(user=foo, class_="view_update"),
        IoqRequest(user=foo, class_="view_update"),
        IoqRequest(user=bar, class_="interactive"),
        IoqRequest(user=bar, class_="db_update"),
        IoqRequest(user=bar, class_="db_update"),
        IoqRequest(user=bar, class_="db_update"),
        IoqRequest(user=bar, class_="view_update"),
    ]
    expected = {
        "compaction": 3,
        "replication": 3,
        "low": 1,
        "channels": {"foo": [2, 1, 4], "bar": [1, 3, 1]},
    }
    assert get_queue_depths(reqs) == expected


def test_queue_depths_count_other_classes_as_interactive_and_unknown_users():
    depths = get_queue_depths([IoqRequest(class_="other"), IoqRequest(class_="db_meta", user="u")])
    assert depths["channels"] == {"undefined": [1, 0, 0], "u": [1, 0, 0]}


def test_error_queue_depths_use_the_magic_number():
    depths = error_queue_depths()
    assert depths["compaction"] == depths["replication"] == depths["low"] == BAD_MAGIC_NUM
    assert depths["channels"] == {}


@pytest.mark.parametrize(
    "shard, expected",
    [
        ("shards/0-1/heroku/app928427/couchrest.1317609656", ("app928427.heroku", "couchrest.1317609656")),
        ("shards/0-1/foo", ("system", "foo")),
        ("shards/0-1/kocolosk/stats.1299297461", ("kocolosk", "stats.1299297461")),
        ("shards/0-1/kocolosk/my/db.1299297457", ("kocolosk", "my/db.1299297457")),
        ("other", (None, None)),
        ("notshards/0-1/a/b", (None, None)),
        (None, (None, None)),
    ],
)
def test_shard_info(shard, expected):
    assert shard_info(shard) == expected


def test_add_request_dimensions_drops_suffix_and_parses_user():
    req = add_request_dimensions(
        IoqRequest(), ("view_update", "shards/00000000-1fffffff/foo/pizza_db.1503945430", "_design/v")
    )
    assert req.class_ == "view_update"
    assert req.shard == "shards/00000000-1fffffff/foo/pizza_db"
    assert (req.user, req.db, req.ddoc) == ("foo", "pizza_db", "_design/v")


@pytest.mark.parametrize("dims", [("interactive", "dbcopy"), ("db_meta", "security")])
def test_special_dimensions_have_no_shard(dims):
    req = add_request_dimensions(IoqRequest(), dims)
    assert req.class_ == dims[0]
    assert (req.shard, req.user, req.db) == (None, None, None)


def test_no_dimensions_is_other():
    assert add_request_dimensions(IoqRequest(), None).class_ == "other"


def test_lists_work_like_tuples_after_json():
    req = add_request_dimensions(IoqRequest(), ["interactive", "shards/0-1/foo/bar"])
    assert req.user == "foo"


@pytest.mark.parametrize("bad", ["interactive", ("interactive",), (1, "shards/0-1/a"), ("a", "b", "c", "d")])
def test_bad_dimensions_raise_naming_the_value(bad):
    with pytest.raises(ValueError, match="IO"):
        add_request_dimensions(IoqRequest(), bad)


def test_rootname():
    assert rootname("shards/00000000-1fffffff/foo.1503945430") == "shards/00000000-1fffffff/foo"
    assert rootname("a.b/c") == "a.b/c"


@pytest.mark.parametrize(
    "msg, kind",
    [
        (("pread_iolist", 1), "reads"),
        (("pread", 1, 10), "reads"),
        (("append_bin", b"x"), "writes"),
        (("append_bin", b"x", True), "writes"),
        (["append", b"x"], "writes"),
        (("other",), "unknown"),
        ("pread", "unknown"),
        ((), "unknown"),
    ],
)
def test_rw(msg, kind):
    assert rw(msg) == kind


def test_dedupe_key_only_for_reads():
    assert dedupe_key("fd", ("pread_iolist", 7)) == ("fd", 7)
    assert dedupe_key("fd", ("pread", 7, 3)) == ("fd", 7, 3)
    assert dedupe_key("fd", ("append", b"x")) is None
    assert dedupe_key("fd", "pread") is None
