"""Read a node's /metrics over HTTP and pick samples out of it (for the tests)."""

from __future__ import annotations

import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape(url: str, timeout: float = 20.0) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` of one GET of ``url``."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    """One sample's value; 0.0 when the series is absent (a counter not yet counted)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def scrape_answered(url: str, seconds: float = 60.0) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """`scrape` until one that every process of the node answered in time (on a loaded machine a host
    can miss the collector's 2 s); bounded in time and tries."""
    deadline = time.monotonic() + seconds
    for _ in range(1000):
        samples = scrape(url)
        if value(samples, "otpy_processes_unanswered") == 0:
            return samples
        if time.monotonic() > deadline:
            break
    raise AssertionError(f"no scrape of {url} that every process answered within {seconds} s")
