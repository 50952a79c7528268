"""`Stats.record_many` and `Histogram.update_many`: a burst handed over at once
leaves exactly what recording each value in turn would have left."""

from __future__ import annotations

import gc
import random

import pytest

from actors._core.base import stats as stats_mod
from actors.stats import Histogram, Stats

pytestmark = pytest.mark.timeout(30)


def test_update_many_matches_one_update_per_value_through_reservoir_wrap(monkeypatch):
    monkeypatch.setattr(stats_mod, "_MAX_SAMPLES", 7)  # small, so bursts wrap the reservoir
    rng = random.Random(11)
    for _trial in range(500):
        one, many = Histogram(), Histogram()
        for _burst in range(rng.randrange(6)):
            values = [rng.uniform(-5, 5) for _ in range(rng.randrange(20))]
            for value in values:
                one.update(value)
            many.update_many(values)
        assert (many.count, many.minimum, many.maximum, many.samples) == (
            one.count,
            one.minimum,
            one.maximum,
            one.samples,
        )
        assert many.total == pytest.approx(one.total)


def test_record_many_adds_counters_and_samples_to_what_is_there():
    stats = Stats()
    stats.increment("a", 2)
    stats.update_histogram("h", 1.0)
    stats.record_many({"a": 3, "b": 1}, {"h": [2.0, 3.0, 4.0], "g": [5.0]})
    snap = stats.snapshot()
    assert snap["counters"] == {"a": 5, "b": 1}
    assert snap["histograms"]["h"]["n"] == 4 and snap["histograms"]["h"]["sum"] == 10.0
    assert snap["histograms"]["g"]["max"] == 5.0


class _Source:
    """A write-behind buffer: holds increments until flushed into its stats."""

    def __init__(self, target: Stats) -> None:
        self.target = target
        self.held = 0
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        held, self.held = self.held, 0
        if held:
            self.target.record_many({"hot": held}, {})


def test_a_registered_source_is_folded_in_before_every_read():
    stats = Stats()
    source = _Source(stats)
    stats.add_source(source)
    source.held = 3
    assert stats.counter("hot") == 3
    source.held = 2
    assert stats.snapshot()["counters"] == {"hot": 5}
    source.held = 4
    stats.reset()  # recorded before the reset: gone with it
    assert stats.counter("hot") == 0
    stats.remove_source(source)
    source.held = 1
    assert stats.counter("hot") == 0 and source.held == 1  # no longer read through


def test_a_source_is_held_weakly():
    stats = Stats()
    source = _Source(stats)
    stats.add_source(source)
    del source
    gc.collect()
    assert stats.snapshot()["counters"] == {}  # nothing left to call
