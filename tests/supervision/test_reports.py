"""A supervisor's log reports, as plain data: one crash, one report with its
traceback; a restart loop summarised, not printed hundreds of times a second."""

from __future__ import annotations

import logging

import pytest

from actors import Crash
from supervision._reports import MAX_TRACEBACK, REPEAT_WINDOW, Reports

pytestmark = pytest.mark.timeout(30)


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "supervision"]


def test_a_crash_report_carries_its_traceback_cut_to_its_end(caplog: pytest.LogCaptureFixture) -> None:
    tb = "Traceback (most recent call last):\n" + "  frame\n" * 2000 + "ValueError: boom\n"
    reports = Reports()
    with caplog.at_level(logging.INFO, logger="supervision"):
        reports.report("sup", "child_terminated", "w", Crash("ValueError", "boom", tb), "restarting", now=0.0)
    (record,) = _lines(caplog)
    text = record.getMessage()
    assert "reason=ValueError: boom action=restarting" in text
    assert text.endswith("ValueError: boom") and len(text) < MAX_TRACEBACK + 500
    assert record.child_id == "w" and record.supervisor == "sup" and record.repeats == 0


def test_a_restart_loop_is_one_line_per_window_saying_how_many_it_stands_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reports = Reports()
    crash = Crash("RuntimeError", "again", "Traceback ...\nRuntimeError: again\n")
    with caplog.at_level(logging.INFO, logger="supervision"):
        for i in range(300):  # 300 restarts in 3 s
            reports.report("sup", "child_terminated", "loop", crash, "restarting", now=i / 100)
        assert len(_lines(caplog)) == 1
        reports.report("sup", "child_terminated", "loop", crash, "restarting", now=3.0 + REPEAT_WINDOW)
    first, second = _lines(caplog)
    assert "more like it" not in first.getMessage()
    assert "(299 more like it in the last" in second.getMessage() and second.repeats == 299
    assert reports.restarts == 301  # counted all the same


def test_other_children_reasons_and_reports_are_each_logged(caplog: pytest.LogCaptureFixture) -> None:
    reports = Reports()
    with caplog.at_level(logging.INFO, logger="supervision"):
        reports.report("sup", "child_terminated", "a", "killed", "restarting", now=0.0)
        reports.report("sup", "child_terminated", "b", "killed", "restarting", now=0.0)
        reports.report("sup", "child_terminated", "a", "noproc", "restarting", now=0.0)
        reports.report("sup", "start_error", "a", "killed", "will retry", now=0.0)
        reports.report("sup", "shutdown", None, "reached_max_restart_intensity", "shutting down", now=0.0)
    assert len(_lines(caplog)) == 5
