"""``smoosh_sup``: the supervision tree, as upstream's.

Upstream ``smoosh_sup`` is ``one_for_one`` with intensity 5 in 10 s and a
single child, ``smoosh_server``, which itself links and restarts the
channels, the access cleaner and the event listener.  The same here:

    smoosh_sup (one_for_one, 5 in 10 s)         host "smoosh" by default
    └── smoosh_server (permanent, shutdown 60 s) same process
        ├── smoosh_channel_<name> ...            linked, recreated on exit
        ├── smoosh_access_cleaner                linked, restarted on exit
        ├── smoosh_event_listener                linked, restarted on exit
        └── smoosh_dir_watcher (optional)        linked, restarted on exit

The whole tree lives in one host process, so the adapter given to
`start_smoosh` is pickled once to get there (`SQLiteAdapter` pickles its
configuration) and then shared by reference; compactions run in worker OS
processes the adapter starts.  ``host=None`` keeps the tree in the calling
process instead.
"""

from __future__ import annotations

from typing import Any

from actors.smoosh._names import SERVER, SUP
from actors.smoosh.server import SmooshServer
from supervision import ChildSpec, Supervisor, SupFlags, start_supervisor

__all__ = ["DEFAULT_HOST", "SERVER_SHUTDOWN", "SmooshSup", "smoosh_children", "smoosh_flags", "start_smoosh"]

#: The host process smoosh runs in unless told otherwise.
DEFAULT_HOST = "smoosh"
#: Seconds the server gets to close its channels (their final checkpoints).
SERVER_SHUTDOWN = 60.0


def smoosh_flags() -> SupFlags:
    return SupFlags("one_for_one", 5, 10)


def smoosh_children(adapter: Any, overrides: dict[str, Any] | None = None, observer: Any = None) -> list[ChildSpec]:
    """The child specs of ``smoosh_sup``."""
    return [ChildSpec(SERVER, (SmooshServer, (adapter, dict(overrides or {}), observer)), shutdown=SERVER_SHUTDOWN)]


class SmooshSup(Supervisor):
    """``smoosh_sup`` as a class, for embedding in a larger tree."""

    def init(self, adapter: Any, overrides: dict[str, Any] | None = None, observer: Any = None) -> Any:
        return smoosh_flags(), smoosh_children(adapter, overrides, observer)


def start_smoosh(
    node_or_actor: Any,
    adapter: Any,
    *,
    host: str | None = DEFAULT_HOST,
    overrides: dict[str, Any] | None = None,
    observer: Any = None,
) -> Any:
    """Start ``smoosh_sup`` and its tree; returns the supervisor's ref.

    ``adapter`` is the host's storage (`actors.smoosh.SQLiteAdapter` or
    any `SmooshAdapter`; it must pickle when ``host`` is not None).
    ``overrides`` set `ServerSettings` fields such as ``checkpoint_interval``
    or ``re_enqueue_delay`` (tests, benchmarks).  ``observer``, an actor
    ref, receives ``("smoosh", event, ...)`` messages as channels start,
    enqueue, start and finish jobs (tests, benchmarks).
    """
    return start_supervisor(
        node_or_actor, smoosh_flags(), smoosh_children(adapter, overrides, observer), name=SUP, host=host
    )
