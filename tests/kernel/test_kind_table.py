"""The runtime hands each frame to the handler registered for its kind.

Pure plumbing, no node: a `Runtime` is built on a runtime directory of its
own and never started, and frames are handed to it as its transport would.
"""

from __future__ import annotations

import pytest

from actors._core.runtime import kinds
from actors._core.runtime.runtime import Runtime
from actors._core.wire.codec import encode_frame

pytestmark = pytest.mark.timeout(30)

#: Every kind a frame may carry to the table (a batch is opened before it).
TABLED = {v for k, v in vars(kinds).items() if k.startswith("K_")} - {kinds.K_BATCH}


@pytest.fixture
def rt(tmp_path):
    runtime = Runtime("table-test", str(tmp_path), "h1", node_proc="n")
    yield runtime
    runtime.shutdown()


def test_every_kind_has_a_handler(rt):
    assert set(rt._kinds) == TABLED


def test_a_frame_of_no_known_kind_is_dropped_and_counted(rt):
    before = rt.dropped_frames
    rt.handle_frames([encode_frame(99, "h1.1", None, None, "h2", "x"), encode_frame("odd", None, None, None, "h2", 1)])
    assert rt.dropped_frames == before + 2


def test_a_registered_handler_gets_the_frames_of_its_kind(rt):
    seen = []
    rt.handle_kind(kinds.K_UNLINK, lambda kind, to, frm, ref, body, src: seen.append((kind, to, body, src)))
    rt.handle_frames([encode_frame(kinds.K_UNLINK, "h1.7", None, None, "h2", "who")])
    assert seen == [(kinds.K_UNLINK, "h1.7", "who", "h2")]


def test_a_reply_resolves_its_pending_request_through_the_table(rt):
    got = []

    class Waiter:
        proc = "h2"

        def resolve(self, ok, value):
            got.append((ok, value))

    rt.pending[5] = Waiter()
    rt.pending[6] = Waiter()
    rt.handle_frames(
        [
            encode_frame(kinds.K_REPLY, None, None, 5, "h2", "yes"),
            encode_frame(kinds.K_REPLY_EXIT, None, None, 6, "h2", "noproc"),
        ]
    )
    assert got == [(True, "yes"), (False, "noproc")] and not rt.pending
