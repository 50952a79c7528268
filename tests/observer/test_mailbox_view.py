"""What `status` and the observer show of a bounded mailbox: its bound,
its policy and what the policy dropped, per actor and for the node."""

from __future__ import annotations

import os

import pytest

from actors import Node
from actors.tools.cli import status_text
from actors.tools.observer import observe
from actors.tree import render_tree
from tests.kernel.mailbox_actors import Gate, Held
from tests.observer.conftest import snapshot, wait_picture


@pytest.mark.timeout(90)
def test_status_and_observer_show_the_bound_and_the_drops(tmp_path) -> None:
    with Node() as node:
        ref = node.spawn(Held, mailbox=2, overflow="drop_newest", host="own", name="held")
        with Gate(ref, tmp_path, expect=2) as gate:
            for i in range(5):
                ref.cast(i)
            assert ref.is_alive()
            gate.release()
        actors = node.actors()
        (line,) = [ln for ln in render_tree(actors) if "held" in ln]
        assert "mbox 0/2 drop_newest dropped 3" in line
        text = status_text(node.id, os.getpid(), actors, node.hosts(), node.stats()["counters"])
        assert "mailboxes: dropped" in text
        web = observe(node, port=0)
        try:
            picture = wait_picture(web, lambda p: any(r.get("actor") == ref.id for r in p["tree"]))
            (row,) = [r for r in picture["tree"] if r.get("actor") == ref.id]
            assert (row["mailbox_limit"], row["overflow"], row["dropped"]) == (2, "drop_newest", 3)
            assert snapshot(web)["node"]["dropped"] >= 3
        finally:
            web.close()
