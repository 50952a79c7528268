"""The lease rules, pure: fake times, no store, no processes."""

from __future__ import annotations

import pytest

from actors.leases.policy import (
    Fence,
    LeaseRow,
    LeaseTimes,
    Run,
    decide_acquire,
    decide_renew,
    fence_ok,
    must_stop,
    overlapping_runs,
)


def test_a_free_lease_goes_to_the_first_asker_with_token_one() -> None:
    row = decide_acquire(None, "j", "a", "1", now=100.0, ttl=10.0)
    assert row == LeaseRow("j", "a", "1", 1, 110.0)


def test_a_held_lease_is_refused_to_others_until_it_expires_then_the_token_grows() -> None:
    held = LeaseRow("j", "a", "1", 4, 110.0, run_id=7)
    assert decide_acquire(held, "j", "b", "9", now=109.999, ttl=10.0) is None
    assert decide_acquire(held, "j", "a", "2", now=105.0, ttl=10.0) is None  # a's next incarnation too
    taken = decide_acquire(held, "j", "b", "9", now=110.0, ttl=10.0)
    assert taken == LeaseRow("j", "b", "9", 5, 120.0)


def test_the_same_holder_asking_again_gets_the_next_token_fencing_its_old_process() -> None:
    held = LeaseRow("j", "a", "1", 4, 110.0)
    again = decide_acquire(held, "j", "a", "1", now=101.0, ttl=10.0)
    assert again is not None and again.token == 5
    assert not fence_ok(again, Fence("j", "a", "1", 4), 101.0)


def test_renewal_only_by_the_current_token_before_expiry() -> None:
    row = LeaseRow("j", "a", "1", 3, 110.0, run_id=2)
    mine = Fence("j", "a", "1", 3)
    assert decide_renew(row, mine, 105.0, 10.0) == LeaseRow("j", "a", "1", 3, 115.0, 2)
    assert decide_renew(row, mine, 110.0, 10.0) is None  # expired: never extended
    assert decide_renew(row, Fence("j", "a", "1", 2), 105.0, 10.0) is None  # an older token
    assert decide_renew(row, Fence("j", "b", "1", 3), 105.0, 10.0) is None  # someone else
    assert decide_renew(None, mine, 105.0, 10.0) is None


def test_fence_refuses_after_expiry_and_after_a_takeover() -> None:
    row = LeaseRow("j", "a", "1", 3, 110.0)
    fence = Fence("j", "a", "1", 3)
    assert fence_ok(row, fence, 109.0)
    assert not fence_ok(row, fence, 110.0)
    taken = decide_acquire(row, "j", "b", "2", 111.0, 10.0)
    assert not fence_ok(taken, fence, 112.0)
    assert fence_ok(taken, Fence("j", "b", "2", 4), 112.0)


def test_holder_deadline_is_before_the_store_expiry_by_the_margin() -> None:
    times = LeaseTimes.from_ttl(12.0)
    assert (times.renew_every, times.margin, times.op_timeout) == (3.0, 4.0, 2.0)
    deadline = times.deadline(sent_at=50.0)
    assert deadline == 58.0
    assert not must_stop(57.999, deadline)
    assert must_stop(58.0, deadline)


@pytest.mark.parametrize("ttl, renew, margin", [(10, 5, 5), (10, 7, 3), (0, 1, 1), (10, -1, 1), (10, 1, float("nan"))])
def test_lease_times_that_leave_no_retry_before_the_deadline_are_refused(ttl, renew, margin) -> None:
    with pytest.raises(ValueError, match="lease"):
        LeaseTimes(ttl, renew, margin)


def test_the_checker_finds_overlaps_of_one_job_only() -> None:
    runs = [
        Run("j", "a", "1", 1, 0.0, 10.0),
        Run("j", "b", "2", 2, 10.0, 20.0),
        Run("k", "a", "1", 1, 5.0, 15.0),
        Run("j", "c", "3", 3, 25.0, 30.0),
    ]
    assert overlapping_runs(runs) == []
    late = Run("j", "a", "1", 4, 19.0, 26.0)
    bad = overlapping_runs(runs + [late])
    assert {(x.token, y.token) for x, y in bad} == {(2, 4), (4, 3)}
    # a run contained in a long one is found even when a short one sits between them
    nested = [Run("j", "a", "1", 1, 0.0, 100.0), Run("j", "b", "2", 2, 1.0, 2.0), Run("j", "c", "3", 3, 50.0, 60.0)]
    assert len(overlapping_runs(nested)) == 2
