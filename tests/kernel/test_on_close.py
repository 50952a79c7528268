"""`Node.on_close`: callbacks run first when the node closes, newest first,
while its actors still run; a failing one does not stop the close; a closed
node refuses new ones.  (The observer closes itself with the node this way.)"""

from __future__ import annotations

import logging

import pytest

from actors import Node
from tests.kernel.probes import Echo


def test_close_hooks_run_first_newest_first_and_a_closed_node_refuses_them(caplog: pytest.LogCaptureFixture) -> None:
    node = Node()
    echo = node.spawn(Echo, host="own")
    ran: list[tuple[str, object]] = []
    node.on_close(lambda: ran.append(("older", echo.call("still here", timeout=10.0))))
    node.on_close(lambda: 1 / 0)
    node.on_close(lambda: ran.append(("newest", echo.call("still here", timeout=10.0))))
    with caplog.at_level(logging.ERROR, logger="actors.node"):
        node.close()
    assert ran == [("newest", "still here"), ("older", "still here")]  # the actor answered both
    assert any("ZeroDivisionError" in (r.exc_text or "") for r in caplog.records)
    with pytest.raises(RuntimeError, match="closed"):
        node.on_close(lambda: None)
    node.close()  # idempotent: nothing runs twice
    assert len(ran) == 2
