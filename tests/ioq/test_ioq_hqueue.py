"""HQueue: the max-priority heap behind IOQ2."""

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from actors.ioq.hqueue import Empty, Full, HQueue, InvalidPriority

pytestmark = pytest.mark.timeout(30)

priorities = st.floats(min_value=0.0, max_value=1e12, allow_nan=False, allow_infinity=False)


def test_extract_max_returns_highest_first():
    hq = HQueue()
    for p, item in [(0.5, "b"), (2.0, "a"), (0.0, "d"), (1.0, "c")]:
        hq.insert(p, item)
    assert hq.size() == 4
    assert [hq.extract_max() for _ in range(4)] == [(2.0, "a"), (1.0, "c"), (0.5, "b"), (0.0, "d")]
    assert hq.is_empty()


def test_equal_priorities_are_fifo():
    hq = HQueue()
    for i in range(5):
        hq.insert(1.0, i)
    assert [hq.extract_max()[1] for _ in range(5)] == [0, 1, 2, 3, 4]


def test_ints_are_accepted_as_priorities():
    hq = HQueue()
    hq.insert(3, "x")
    assert hq.extract_max() == (3.0, "x")


def test_empty_extract_raises_empty():
    with pytest.raises(Empty, match="empty"):
        HQueue().extract_max()


@pytest.mark.parametrize("bad", [-0.1, -1, float("nan"), float("inf"), "1.0", None, True, [1.0]])
def test_bad_priorities_are_rejected(bad):
    hq = HQueue()
    with pytest.raises(InvalidPriority, match="priority"):
        hq.insert(bad, "x")
    assert hq.is_empty()


def test_full_raises_and_keeps_contents():
    hq = HQueue(max_size=2)
    hq.insert(1.0, "a")
    hq.insert(2.0, "b")
    with pytest.raises(Full, match="full"):
        hq.insert(3.0, "c")
    assert hq.to_list() == [(2.0, "b"), (1.0, "a")]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None])
def test_bad_max_size_is_rejected(bad):
    with pytest.raises(ValueError, match="max_size"):
        HQueue(max_size=bad)


def test_set_max_size_refuses_to_shrink_below_size():
    hq = HQueue(max_size=4)
    for i in range(3):
        hq.insert(float(i), i)
    with pytest.raises(ValueError, match="below the current size"):
        hq.set_max_size(2)
    hq.set_max_size(3)
    assert hq.max_size == 3


def test_scale_by_multiplies_every_priority_and_zero_stays_zero():
    hq = HQueue()
    hq.insert(0.0, "zero")
    hq.insert(1.5, "a")
    hq.insert(0.25, "b")
    hq.scale_by(2.0)
    assert hq.to_list() == [(3.0, "a"), (0.5, "b"), (0.0, "zero")]


@pytest.mark.parametrize("bad", [0, -2.0, float("nan"), float("inf"), "2", None])
def test_scale_by_rejects_non_positive_factors(bad):
    hq = HQueue()
    hq.insert(1.0, "a")
    with pytest.raises(ValueError, match="scale factor"):
        hq.scale_by(bad)
    assert hq.to_list() == [(1.0, "a")]


def test_scale_by_caps_at_largest_float():
    hq = HQueue()
    hq.insert(1e300, "big")
    hq.insert(1e299, "smaller")
    hq.scale_by(1e10)
    big, smaller = hq.to_list()
    assert math.isfinite(big[0]) and big[1] == "big"
    assert smaller[1] == "smaller"


def test_clear_returns_contents():
    hq = HQueue()
    hq.insert(1.0, "a")
    assert hq.clear() == [(1.0, "a")]
    assert hq.is_empty() and len(hq) == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(priorities, max_size=60))
def test_extract_order_is_non_increasing(ps):
    hq = HQueue()
    for i, p in enumerate(ps):
        hq.insert(p, i)
    out = [hq.extract_max()[0] for _ in range(len(ps))]
    assert out == sorted(ps, reverse=True)
    assert hq.is_empty()


@settings(max_examples=60, deadline=None)
@given(st.lists(priorities, max_size=60), st.floats(min_value=0.01, max_value=100.0))
@example(ps=[0.0, 1.0, 5e-324], factor=0.5)
def test_scale_by_preserves_order(ps, factor):
    hq = HQueue()
    for i, p in enumerate(ps):
        hq.insert(p, i)
    before = hq.to_list()
    hq.scale_by(factor)
    after = []
    while not hq.is_empty():
        after.append(hq.extract_max())
    # Scaling can merge distinct priorities into one (a subnormal times 0.5
    # underflows to 0.0); the order inside a tie is unspecified, so compare
    # the items priority group by priority group, in order.
    assert _tie_groups(after) == _tie_groups([(p * factor, i) for p, i in before])
    assert [p for p, _i in after] == sorted((p for p, _i in after), reverse=True)


def _tie_groups(pairs):
    groups: list[tuple[float, set]] = []
    for p, item in pairs:
        if groups and groups[-1][0] == p:
            groups[-1][1].add(item)
        else:
            groups.append((p, {item}))
    return groups


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(priorities, st.none()), max_size=80), st.integers(min_value=1, max_value=20))
def test_size_stays_within_bounds(ops, bound):
    hq = HQueue(max_size=bound)
    model = 0
    for op in ops:
        if op is None:
            if model:
                hq.extract_max()
                model -= 1
            else:
                with pytest.raises(Empty):
                    hq.extract_max()
        elif model < bound:
            hq.insert(op, "x")
            model += 1
        else:
            with pytest.raises(Full):
                hq.insert(op, "x")
        assert hq.size() == model <= bound
        assert hq.is_empty() == (model == 0)
