"""OsqState: per-account limits on requests to OS processes (the seed's ioq_osq)."""

import pytest

from actors.config import Config
from actors.ioq.osq_state import OsqRequest, OsqState, osq_channel_name
from actors.stats import Stats

pytestmark = pytest.mark.timeout(10)


def permit(account, caller):
    return OsqRequest("rlimit", ("interactive", f"shards/0-1/{account}/db"), 0.0, caller)


def test_channel_names():
    assert osq_channel_name("shards/0-1/heroku/app/db") == "app.heroku"
    assert osq_channel_name("shards/0-1/acct/db") == "acct"
    assert osq_channel_name("nope") == "other"
    assert OsqRequest("rlimit", ("view_update", "shards/0-1/acct/db", "g")).channel == "acct"
    assert OsqRequest("call", ("db_compact", "shards/0-1/acct/db")).channel == "other"


def test_one_account_is_capped_at_max_while_others_run():
    st = OsqState(minimum=1, maximum=2, global_maximum=10)
    granted = [sub for i in range(4) for sub in st.enqueue(permit("busy", f"b{i}"), 0.0)]
    assert [s.request.from_ for s in granted] == ["b0", "b1"]
    (other,) = st.enqueue(permit("quiet", "q0"), 0.0)
    assert other.channel == "quiet"
    assert st.get_queue_depths() == [("busy", 2)]
    (nxt,) = st.release(granted[0].ref, 1.0)
    assert nxt.request.from_ == "b2"
    assert [r[1] for r in st.get_requests()] == ["notify"] * 3


def test_global_maximum_drops_accounts_to_minimum():
    st = OsqState(minimum=1, maximum=3, global_maximum=2)
    assert len(st.enqueue(permit("a", "a0"), 0.0)) == 1
    assert len(st.enqueue(permit("a", "a1"), 0.0)) == 1
    # two running = global max: only accounts below the minimum (1) may start
    assert st.enqueue(permit("a", "a2"), 0.0) == []
    assert len(st.enqueue(permit("b", "b0"), 0.0)) == 1


def test_calls_are_forwarded_and_answered_and_fail_on_down():
    st = OsqState(stats=Stats())
    req = OsqRequest("call", ("interactive", "shards/0-1/a/db"), 0.0, "caller", fd="os", msg=("prompt", 1))
    (sub,) = st.enqueue(req, 0.5)
    assert sub.request.fd == "os"
    done, more = st.complete(sub.ref, "answer", 1.0)
    assert (done.waiters, done.reply, more) == (["caller"], "answer", [])
    (sub,) = st.enqueue(OsqRequest("call", None, 0.0, "c2", fd="os", msg=("data", 2)), 1.0)
    done, _more = st.down(sub.ref, "noproc", 1.0)
    assert done.error.reason == "noproc"
    assert st.complete(12345, None, 1.0) == (None, [])
    counters = st.stats.snapshot()["counters"]
    assert counters["couchdb.io_queue.osproc"] == 2 and counters["couchdb.io_queue.interactive"] == 1
    assert st.counters[("a", "interactive", "osproc")] == 1


def test_permit_holder_death_frees_the_slot():
    st = OsqState(minimum=1, maximum=1, global_maximum=5)
    (first,) = st.enqueue(permit("a", "a0"), 0.0)
    assert st.enqueue(permit("a", "a1"), 0.0) == []
    done, more = st.down(first.ref, "killed", 1.0)
    assert done is None and [s.request.from_ for s in more] == ["a1"]


def test_thresholds_from_config_and_setters():
    st = OsqState.from_config(Config({"osq": {"minimum": "3", "maximum": "0", "global_maximum": "x"}}))
    assert (st.min, st.max, st.global_max) == (3, 6, 15)
    st.set_maximum(9)
    assert st.max == 9
    for setter in (st.set_minimum, st.set_maximum, st.set_global_maximum):
        with pytest.raises(ValueError, match="integer >= 1"):
            setter(0)
    with pytest.raises(ValueError, match="kind"):
        st.enqueue(OsqRequest("bogus"), 0.0)
