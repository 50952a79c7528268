"""Starting couch_jobs's real actor tree on the test's node, and waiting on it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import supervision
from actors import ActorRef, Exit, Node
from actors.couch_jobs import app, process, set_default
from actors.couch_jobs.client import force_check_types
from actors.couch_jobs.naming import ACTIVITY_MONITOR_SUP, NOTIFIER_SUP, SERVER_NAME, TOP_SUP
from actors.couch_jobs.sup import get_child_pids

T1 = ("t1", 1024)  # a complex type should work
T2 = 42  # a number should work as well
T1_TIMEOUT = 2
T2_TIMEOUT = 3


def start_tree(node: Node, path: Any, settings: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
    """The seed's ``setup/0`` on a real tree; a generator for a fixture."""
    for key, value in (settings or {}).items():
        node.config.set("couch_jobs", key, value)
    app.start(node, path)
    jobs = process.local_jobs()
    try:
        jobs.set_type_timeout(T1, T1_TIMEOUT)
        jobs.set_type_timeout(T2, T2_TIMEOUT)
        force_check_types()
        yield {
            "node": node,
            "jobs": jobs,
            "t1": T1,
            "t2": T2,
            "t1_timeout": T1_TIMEOUT,
            "j1": "j1",
            "j2": "j2",
        }
    finally:
        app.stop(node)
        process.detach()
        set_default(None)
        jobs.close()


def restart_app(node: Node) -> None:
    """The seed's ``restart_app/0``."""
    app.stop(node)
    app.start(node)
    force_check_types()


def server(node: Node) -> ActorRef:
    ref = node.whereis(SERVER_NAME)
    assert ref is not None
    return ref


def notifiers(node: Node) -> list[ActorRef]:
    return get_child_pids(node.whereis(NOTIFIER_SUP))


def activity_monitors(node: Node) -> list[ActorRef]:
    return get_child_pids(node.whereis(ACTIVITY_MONITOR_SUP))


def wait_down(node: Node, ref: ActorRef, timeout: float = 10.0) -> Any:
    return node.monitor(ref).wait(timeout)[1]


def wait_restored(node: Node, old_server: ActorRef, timeout: float = 10.0) -> ActorRef:
    """Wait until the tree runs a new server again and it has checked the types.

    Bounded; every round is a call to the top supervisor (no sleeping).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = {c.id: c.child for c in supervision.which_children(node.whereis(TOP_SUP))}
        new = rows.get(SERVER_NAME)
        if isinstance(new, ActorRef) and new != old_server:
            try:
                force_check_types()
            except Exit:
                continue  # it died again meanwhile
            return new
    raise AssertionError(f"couch_jobs_server was not restarted within {timeout}s")
