"""What one read of an endpoint brings an actor reaches it as one mailbox entry.

The reader of a host's endpoint (its I/O thread, or the actor it is lent
to) gathers per actor the casts, sends and calls of one read and puts them
in the mailbox together, so a server sent a burst is woken once for it.
`GenServer.mailbox_empty` still sees the rest of such an entry as mail: a
server that acts once its mailbox is drained (IOQ submits then) must not
take the middle of a burst for its end.
"""

from __future__ import annotations

import queue
from typing import Any

import pytest

from actors._core.runtime.runtime import K_CALL, K_CAST, current_runtime
from actors._core.runtime.waiters import Waiter
from actors._core.wire.codec import encode_frame
from actors._core.wire.ref import From
from tests.kernel.probes import MailboxWatcher, Probe, Scripted

pytestmark = pytest.mark.timeout(60)


def test_a_cast_batch_is_mail_until_its_last_item(node):
    watcher = node.spawn(MailboxWatcher, host="own")
    q: "queue.Queue[Any]" = queue.Queue()
    sender = node.spawn(Scripted, node.spawn(Probe, q), host="own")
    # One callback's casts to one process leave as one frame.  Whether the
    # last looks like the end of the mail depends on whether the call behind
    # it was read in the same go; the first two always have mail behind them.
    sender.cast([("cast", watcher, 1), ("cast", watcher, 2), ("cast", watcher, 3), ("call", watcher, "seen")])
    kind, (outcome, notes) = q.get(timeout=10)
    assert (kind, outcome) == ("seen", "reply")
    assert notes[:2] == [(1, False), (2, False)] and notes[2][0] == 3


def test_calls_read_together_reach_the_actor_as_one_entry(node):
    """Three calls read in one go reach the actor in order, and the first
    two see more mail behind them."""
    runtime = current_runtime()  # the test process's: the watcher lives here
    watcher = node.spawn(MailboxWatcher)
    waiters = []
    frames = []
    for i in range(3):
        ref = runtime.new_ref()
        waiter = Waiter(runtime.proc)
        runtime.pending[ref] = waiter
        waiters.append(waiter)
        frames.append(encode_frame(K_CALL, watcher.id, "test-caller", ref, runtime.proc, ("note", i)))
    runtime.handle_frames(frames)
    answers = []
    for waiter in waiters:
        assert waiter.lock.acquire(timeout=10)
        assert waiter.ok
        answers.append(waiter.value)
    assert answers == [False, False, True]
    assert watcher.call("seen") == [(("note", 0), False), (("note", 1), False), (("note", 2), True)]


def test_calls_batched_for_an_actor_that_died_are_refused_for_a_noproc_answer(node):
    runtime = current_runtime()
    watcher = node.spawn(MailboxWatcher)
    cell = runtime.cells[watcher.id]
    down = node.monitor(watcher)
    node.exit(watcher, "kill")
    assert down.wait(10)[1] == "killed"
    calls = [From(runtime.proc, runtime.new_ref(), "test-caller") for _ in range(2)]
    items = [(K_CALL, "a", calls[0]), (K_CAST, "not a call", None), (K_CALL, "b", calls[1])]
    refused = cell.enqueue_batch(items, calls)
    assert refused == calls
