"""Property: what a bounded mailbox hands its actor arrives in the order it
was sent, and is exactly what was sent minus what the policy says it
dropped -- on the mailbox alone (every interleaving of puts and takes), and
end to end through a node, in the sender's process and in a host."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors import CallTimeout, GenServer, MailboxFull, Node
from actors._core.runtime.mailbox import ACCEPTED, DROPPED, OVERFLOW_POLICIES, PARKED, BoundedInbox, MailboxLimit

K_CAST = 1


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(1, 6),
    policy=st.sampled_from(OVERFLOW_POLICIES),
    ops=st.lists(st.sampled_from(["put", "put", "put_waiting", "take", "kernel"]), max_size=80),
)
def test_the_mailbox_keeps_order_and_accounts_for_every_drop(size, policy, ops) -> None:
    admitted: list[int] = []
    inbox = BoundedInbox(MailboxLimit(size, policy), lambda entries: admitted.extend(e[1] for e, _ in entries))
    sent: list[int] = []
    dropped: set[int] = set()
    taken: list[int] = []
    parked: list[int] = []
    for op in ops:
        if op == "kernel":
            inbox.put((101, "DOWN", None))  # never dropped, never counted
        elif op == "take":
            if not inbox.empty():
                item = inbox.get_nowait()
                if item[0] == K_CAST:
                    taken.append(item[1])
        else:
            n = len(sent)
            sent.append(n)
            full = inbox.user >= size or bool(inbox.parked)
            outcome, other = inbox.offer((K_CAST, n, None), admission=object() if op == "put_waiting" else None)
            if outcome == DROPPED:
                assert other[1] == n and policy != "drop_oldest"
                dropped.add(n)
            elif outcome == PARKED:
                assert policy == "block" and op == "put_waiting"
                parked.append(n)
            elif other is not None:
                assert policy == "drop_oldest"
                dropped.add(other[1])
            assert inbox.user <= size
            assert (outcome == ACCEPTED and other is None) == (not full)  # only a full mailbox drops or parks
    while not inbox.empty():
        item = inbox.get_nowait()
        if item[0] == K_CAST:
            taken.append(item[1])
    assert taken == sorted(taken)  # in order
    assert taken == [n for n in sent if n not in dropped]  # exactly what was sent, minus the drops
    assert inbox.dropped == len(dropped)
    assert admitted == parked  # every parked message got in, in order


class Keeper(GenServer):
    """Keeps what it is cast, spending ``work`` loop turns on each (no sleep)."""

    def init(self, work: int) -> None:
        self.work = work
        self.seen: list[int] = []

    def handle_cast(self, request: int) -> None:
        for _ in range(self.work):
            pass
        self.seen.append(request)

    def handle_call(self, request, from_):
        if request == "seen":
            return list(self.seen)
        return self._actor_cell.info()["dropped"]


@pytest.fixture(scope="module")
def shared_node():
    with Node() as node:
        yield node


def _settle(ref, sent: int) -> tuple[list[int], int]:
    """The actor's record once every message is accounted for; calls the
    policy itself drops (they fail with MailboxFull) are not counted."""
    refused = 0
    deadline = time.monotonic() + 30.0
    for _ in range(100_000):
        try:
            seen = ref.call("seen", timeout=10)
            dropped = ref.call("dropped", timeout=10)
        except MailboxFull:
            refused += 1
            continue
        except CallTimeout:
            continue
        if len(seen) + dropped - refused >= sent or time.monotonic() > deadline:
            return seen, dropped - refused
    raise AssertionError("the actor never settled")


@pytest.mark.timeout(300)
@settings(max_examples=24, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    size=st.integers(1, 16),
    policy=st.sampled_from(OVERFLOW_POLICIES),
    n=st.integers(0, 300),
    work=st.sampled_from([0, 2000, 20000]),
    host=st.sampled_from([None, "own"]),
)
def test_end_to_end_arrivals_are_sent_minus_drops(shared_node, size, policy, n, work, host) -> None:
    ref = shared_node.spawn(Keeper, work, mailbox=size, overflow=policy, host=host)
    try:
        for i in range(n):
            ref.cast(i, timeout=30.0)
        seen, dropped = _settle(ref, n)
        assert seen == sorted(seen) and len(set(seen)) == len(seen)  # in order, no duplicates
        assert set(seen) <= set(range(n))
        assert len(seen) + dropped == n  # nothing lost that the policy did not drop
        if policy == "block":
            assert dropped == 0 and seen == list(range(n))
    finally:
        shared_node.stop(ref)
