"""Behaviour the seed's code specifies and an audit of the port found missing.

Each test names the seed rule it pins (file and function in
/work/shared/seeds/002_08f68d774e2b3ec0.txt).
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
