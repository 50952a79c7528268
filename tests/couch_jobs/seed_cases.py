"""The seed's subscribe cases, run twice: on the store (`test_couch_jobs`)
and on the real actor tree, through the notifier actors (`test_actor_tree`).

``TX = None`` plays the seed's ``?TX = undefined``: the API opens its own
transaction.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import pytest

import actors.couch_jobs as couch_jobs
from actors.couch_jobs import NotFound, Subscription

TX = None

_markers = itertools.count()


def nothing_more(
    subs: Subscription | Sequence[Subscription],
    state: str | None = None,
    subscribe: Callable[[str], Subscription] | None = None,
    wait: Callable[[list[Subscription]], Any] | None = None,
) -> list[Any]:
    """Assert that no event (none in ``state``, when given) comes for ``subs``
    by waiting on a marker, not on a short window: a marker job of the same
    type is added, subscribed to and removed, and its ``not_found`` event is
    waited for together with ``subs``.  A type's notifier reads its jobs in
    the order they were first subscribed to and delivers in that order, so
    an event for ``subs`` due by then arrives before the marker's.

    ``subscribe``/``wait`` run those in another process (an actor that
    waits); by default the calling thread does.  Returns the events taken
    for ``subs`` before the marker (only ones outside ``state`` may be)."""
    subs = [subs] if isinstance(subs, Subscription) else list(subs)
    job_type = subs[0].type
    marker = f"marker-{next(_markers)}"
    couch_jobs.add(TX, job_type, marker, {})
    if subscribe is None:
        msub, mstate, _ = couch_jobs.subscribe(job_type, marker)
    else:
        msub, mstate, _ = subscribe(marker)
    assert mstate == "pending"
    couch_jobs.remove(TX, job_type, marker)
    before = []
    for _ in range(100):  # bounded: each round takes one event or fails
        if wait is None:
            event = couch_jobs.wait(subs + [msub], None, 10)
        else:
            event = wait(subs + [msub])
        assert event is not None, "the marker's not_found event never came"
        if event[1] == marker:
            assert tuple(event)[2:] == ("not_found", None), event
            break
        assert state is not None and event[2] != state, f"an event came after the last one: {event}"
        before.append(event)
    else:
        raise AssertionError(f"the marker's event never came among {before}")
    return before


def subscribe_case(ctx: dict[str, Any]) -> None:
    """The seed's ``subscribe``: a subscription follows one job from pending
    through running updates to finished, and ends with it."""
    t, j = ctx["t1"], ctx["j1"]
    couch_jobs.add(TX, t, j, {"z": 1})

    with pytest.raises(NotFound):
        couch_jobs.subscribe("xyz", j)
    with pytest.raises(NotFound):
        couch_jobs.subscribe(t, "j5")

    sub_res0 = couch_jobs.subscribe(t, j)
    sub_id0, state, data = sub_res0
    assert (state, data) == ("pending", {"z": 1})
    assert isinstance(sub_id0, Subscription)
    assert (sub_id0.type, sub_id0.id) == (t, j)

    sub_res1 = couch_jobs.subscribe(t, j)
    assert sub_res1 == sub_res0

    assert couch_jobs.unsubscribe(sub_id0) is None

    sub_id, state, data = couch_jobs.subscribe(t, j)
    assert (state, data) == ("pending", {"z": 1})
    assert sub_id != sub_id0

    job, _ = couch_jobs.accept(t, timeout=5)
    assert couch_jobs.wait(sub_id, timeout=5) == (t, j, "running", {"z": 1})

    # Make sure we get intermediate `running` updates
    couch_jobs.update(TX, job, {"z": 2})
    assert couch_jobs.wait(sub_id, timeout=5) == (t, j, "running", {"z": 2})

    assert couch_jobs.finish(TX, job, {"z": 3}) is None
    assert couch_jobs.wait(sub_id, "finished", 5) == (t, j, "finished", {"z": 3})

    nothing_more(sub_id)

    assert couch_jobs.subscribe(t, j) == (None, "finished", {"z": 3})

    assert couch_jobs.remove(TX, t, j) is None
    with pytest.raises(NotFound):
        couch_jobs.subscribe(t, j)


def subscribe_wait_multiple_case(ctx: dict[str, Any]) -> None:
    """The seed's ``subscribe_wait_multiple``: one wait over two subscriptions
    gets each job's events once; unsubscribing drops a finished event already
    sent."""
    t, j1, j2 = ctx["t1"], ctx["j1"], ctx["j2"]
    couch_jobs.add(TX, t, j1, {})
    couch_jobs.add(TX, t, j2, {})

    s1, state1, data1 = couch_jobs.subscribe(t, j1)
    s2, state2, data2 = couch_jobs.subscribe(t, j2)
    assert (state1, data1, state2, data2) == ("pending", {}, "pending", {})

    subs = [s1, s2]

    # Accept one job. Only one running update is expected. PJob1 and PJob2
    # do not necessarily correspond to Job1 and Job2.
    pjob1, _ = couch_jobs.accept(t, timeout=5)
    assert couch_jobs.wait(subs, timeout=5).state == "running"
    nothing_more(subs)

    # Accept another job. Expect another update.
    pjob2, _ = couch_jobs.accept(t, timeout=5)
    assert couch_jobs.wait(subs, timeout=5).state == "running"
    nothing_more(subs)

    couch_jobs.update(TX, pjob1, {"q": 5})
    couch_jobs.update(TX, pjob2, {"r": 6})

    # Each job was updated once, expect two running updates.
    assert couch_jobs.wait(subs, timeout=5).state == "running"
    assert couch_jobs.wait(subs, timeout=5).state == "running"

    # Finish one job. Expect one finished update only.
    assert couch_jobs.finish(TX, pjob1) is None
    event = couch_jobs.wait(subs, "finished", 5)
    assert (event.state, event.data) == ("finished", {"q": 5})
    nothing_more(subs, "finished")

    # Finish another job. However, unsubscribe should flush the
    # the message and we should not get it.
    assert couch_jobs.finish(TX, pjob2) is None
    assert couch_jobs.unsubscribe(s1) is None
    assert couch_jobs.unsubscribe(s2) is None
    nothing_more(subs)
