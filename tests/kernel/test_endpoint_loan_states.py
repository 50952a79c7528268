"""The endpoint loan's state machine, driven by hand (no processes).

The rule every test here checks one way or another: whenever nobody reads
the endpoint (``FREE``), the takeover timer is armed or a hand-over is
asked for, so the I/O thread reads within `TAKEOVER` at the latest.
"""

from __future__ import annotations

import select
import threading

import pytest
import zmq

from actors._core.transport import endpoint_loan
from actors._core.transport.endpoint_loan import FREE, IO, LENT, LENT_MAIL, LENT_REFUSED, LENT_TIMEOUT, EndpointLoan

pytestmark = pytest.mark.timeout(30)


class FakeTransport:
    """What a loan uses of its transport: the endpoint, a wake-up, frames."""

    def __init__(self, ctx: zmq.Context, name: str) -> None:
        self.address = f"inproc://{name}"
        self.pull = ctx.socket(zmq.PULL)
        self.pull.bind(self.address)
        self.stopping = False
        self.wakes = 0
        self.frames: list[bytes] = []

    def wake(self) -> None:
        self.wakes += 1

    def handle_lent_frames(self, frames: list[bytes]) -> None:
        self.frames.extend(frames)


@pytest.fixture
def ctx():
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


@pytest.fixture
def parts(ctx, request):
    transport = FakeTransport(ctx, request.node.name)
    returned: list[int] = []
    loan = EndpointLoan(transport, lambda: returned.append(1))
    arms: list[float] = []
    real_arm = loan.timer.arm

    def counting_arm(seconds: float) -> None:
        arms.append(seconds)
        real_arm(seconds)

    loan.timer.arm = counting_arm  # type: ignore[method-assign]
    yield transport, loan, returned, arms
    loan.close()
    transport.pull.close(linger=0)


def _timer_expires(loan: EndpointLoan) -> None:
    assert select.select([loan.timer.fd], [], [], 5.0)[0], "the takeover timer never fired"
    loan.timer.clear()


def test_the_io_thread_reads_until_the_borrower_asks(parts):
    transport, loan, returned, _arms = parts
    assert loan.state == IO
    assert loan.serve(None, lambda: False) == LENT_REFUSED
    assert transport.wakes == 1  # asked, once
    assert loan.serve(None, lambda: False) == LENT_REFUSED
    assert transport.wakes == 1
    assert loan.io_turn(False) == FREE
    assert returned == [1]


def test_an_endpoint_given_back_is_timed_until_the_borrower_takes_it(parts):
    _transport, loan, returned, arms = parts
    loan.serve(None, lambda: False)
    assert loan.io_turn(False) == FREE
    # The borrower found mail first and runs a callback: nobody reads, so
    # the timer must be running.
    assert len(arms) == 1
    _timer_expires(loan)
    assert loan.io_turn(True) == IO
    assert loan.takeovers == 1


def test_a_busy_spell_arms_the_timer_once(ctx, parts):
    transport, loan, _returned, arms = parts
    loan.serve(None, lambda: False)
    loan.io_turn(False)  # given back: FREE, armed
    push = ctx.socket(zmq.PUSH)
    push.connect(transport.address)
    for i in range(3):
        push.send(b"frame%d" % i)
        # Each frame is mail for the borrower: serve returns once it was handled.
        assert loan.serve(5.0, lambda n=i + 1: len(transport.frames) >= n) == LENT_MAIL
        assert loan.state == FREE
    assert transport.frames == [b"frame0", b"frame1", b"frame2"]
    assert len(arms) == 1  # armed when given back, still armed: not once per message
    push.close(linger=0)


def test_a_short_busy_spell_is_not_taken_over(parts, monkeypatch):
    # Long enough that no pause of a loaded machine between two lines
    # outlasts it.
    monkeypatch.setattr(endpoint_loan, "TAKEOVER", 0.5)
    _transport, loan, _returned, arms = parts
    loan.serve(None, lambda: False)
    loan.io_turn(False)
    _timer_expires(loan)
    assert loan.serve(0.0, lambda: False) == LENT_TIMEOUT  # took it, then let go: busy from now
    assert loan.io_turn(True) == FREE  # the fire belonged to the earlier spell: re-armed for the rest
    assert len(arms) == 2
    _timer_expires(loan)
    assert loan.io_turn(True) == IO


def test_a_fire_while_lent_disarms_and_the_next_release_arms_again(parts):
    _transport, loan, _returned, arms = parts
    loan.serve(None, lambda: False)
    loan.io_turn(False)
    loan.state = LENT  # as serve holds it while polling
    _timer_expires(loan)
    assert loan.io_turn(True) == LENT
    loan._release()
    assert loan.state == FREE
    assert len(arms) == 2


def test_blocking_hands_the_endpoint_over_at_once(parts):
    transport, loan, _returned, _arms = parts
    loan.serve(None, lambda: False)
    loan.io_turn(False)
    assert loan.serve(0.0, lambda: False) == LENT_TIMEOUT  # the borrower's thread is known now
    wakes = transport.wakes
    loan.blocking()
    assert transport.wakes == wakes + 1
    assert loan.io_turn(False) == IO


def test_the_end_of_the_borrower_returns_the_endpoint_for_good(parts):
    _transport, loan, returned, _arms = parts
    loan.serve(None, lambda: False)
    loan.io_turn(False)
    loan.end()
    assert loan.io_turn(False) == IO
    assert loan.serve(None, lambda: False) == LENT_REFUSED
    assert loan.io_turn(False) == IO  # an ended loan is not given back
    assert returned == [1]


def test_a_loan_made_on_the_io_thread_starts_free_and_timed(ctx, request):
    transport = FakeTransport(ctx, request.node.name + "-free")
    loan = EndpointLoan(transport, lambda: None, free=True)
    try:
        assert loan.state == FREE
        _timer_expires(loan)  # armed from the start
        assert loan.serve(0.0, lambda: False) == LENT_TIMEOUT
    finally:
        loan.close()
        transport.pull.close(linger=0)


def test_a_stopping_process_refuses_the_loan(parts):
    transport, loan, _returned, _arms = parts
    loan.serve(None, lambda: False)
    loan.io_turn(False)
    transport.stopping = True
    assert loan.serve(None, lambda: False) == LENT_REFUSED
    assert loan.wait_released(1.0)


def test_a_borrower_bound_before_it_serves_hands_over_for_a_request_in_init(ctx, request):
    # A host's first actor registers its name in init, before it ever
    # served: its thread is bound first, so the answer is not left for the
    # takeover timer.
    transport = FakeTransport(ctx, request.node.name + "-bound")
    loan = EndpointLoan(transport, lambda: None, free=True)
    try:
        loan.bind_thread()
        loan.blocking()
        assert transport.wakes == 1
        assert loan.io_turn(False) == IO
    finally:
        loan.close()
        transport.pull.close(linger=0)


def test_take_in_hands_on_what_waits_on_the_endpoint_during_a_callback(ctx, parts):
    # mailbox_empty() of a borrower: what arrived counts, as it would if the
    # I/O thread were reading.
    transport, loan, _returned, _arms = parts
    loan.bind_thread()
    loan.serve(None, lambda: False)
    loan.io_turn(False)  # given back: FREE, as while a callback runs
    assert loan.take_in() is False  # nothing waits
    push = ctx.socket(zmq.PUSH)
    push.connect(transport.address)
    push.send(b"one")
    push.send(b"two")
    for _ in range(1000):  # inproc delivery is immediate, but bounded anyway
        if transport.pull.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            break
    assert loan.take_in() is True
    assert transport.frames == [b"one", b"two"]
    assert loan.state == FREE
    push.close(linger=0)


def test_take_in_is_the_borrowers_alone_and_not_while_the_io_thread_reads(parts):
    _transport, loan, _returned, _arms = parts
    loan.bind_thread()
    assert loan.state == IO
    assert loan.take_in() is False  # the I/O thread reads, and hands on itself
    loan.serve(None, lambda: False)
    loan.io_turn(False)
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(loan.take_in()))
    thread.start()
    thread.join(5)
    assert results == [False]
    assert loan.state == FREE
