"""Behaviour CouchDB's IOQ specifies and an audit of the port found missing.

Each test names the upstream rule it pins, by module and function
(``ioq_osq:record_stats``, ``ioq:get_disk_counters/0``, ...).
"""

import pytest

from actors.ioq.osq_state import OsqRequest, OsqState
from actors.stats import Stats

pytestmark = pytest.mark.timeout(10)


def test_osq_request_without_dimensions_counts_as_undefined_class():
    # ioq_osq:record_stats: IOClass = Pri when Pri is not a tuple, so a request
    # with no dimensions (undefined) increments [couchdb, io_queue, undefined],
    # the "requests routed through IO queue without I/O class" metric.
    stats = Stats()
    st = OsqState(stats=stats)
    (sub,) = st.enqueue(OsqRequest("rlimit", None, 0.0, "caller"), 0.0)
    assert sub.channel == "other"
    counters = stats.snapshot()["counters"]
    assert counters.get("couchdb.io_queue.undefined") == 1
    assert "couchdb.io_queue.None" not in counters
    assert counters.get("couchdb.io_queue.osproc") == 1


# -- the facade ------------------------------------------------------------------


@pytest.fixture
def ioq_tree(node, tmp_path):
    from actors.ioq.file_server import FileServer
    from actors.ioq.sup import start_ioq

    node.config.set("ioq2", "servers", "1")
    start_ioq(node, pin=False)
    return node.spawn(FileServer, str(tmp_path / "a.couch"), host="files")


def test_get_disk_counters_is_ioq1s_counters_or_none_under_ioq2(node, ioq_tree):
    # ioq:get_disk_counters/0: IOQ1 answers its counters table (keyed
    # {Channel, IOClass, RW}); ioq_server2:get_counters/0 is `undefined`.
    from actors.ioq import api

    f = ioq_tree
    node.config.set("ioq2", "enabled", "false")
    pos = api.call(f, ("append_bin", b"x"), ("db_update", "shards/0-1/acct/db.1"))
    api.call(f, ("pread_iolist", pos), ("interactive", "shards/0-1/acct/db.1"))
    counters = api.get_disk_counters()
    assert {tuple(k) if isinstance(k, list) else k: v for k, v in dict(counters).items()} == {
        ("acct", "db_update", "writes"): 1,
        ("acct", "interactive", "reads"): 1,
    }
    node.config.set("ioq2", "enabled", "true")
    assert api.get_disk_counters() is None
