"""`observe(target)`: start an observer for a node or an attached view.

The observer is a tool over the kernel, never part of it: it takes a node
(or an `actors.attach.Attached` view) and reads it through the public API.
A node's observer is closed by the node's own close, through the node's
public close hook (`Node.on_close`).  The web server and its libraries
(Starlette, uvicorn, psutil) are the optional ``[observer]`` extra, so they
are loaded when an observer is asked for, not when `actors.tools.observer` is
imported, and a missing extra is reported with the command that installs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.tools.observer.server import Observer

__all__ = ["observe"]

EXTRA_HINT = "the observer needs its extra: pip install 'otpy-actors[observer]'"


def observe(
    target: Any, port: int = 8421, host: str = "127.0.0.1", token: str | None = None, interval: float = 0.5
) -> "Observer":
    """Serve the observer page for ``target`` (a `Node` or `actors.attach.Attached`); returns the
    running `actors.tools.observer.server.Observer` (``.url``, ``.close()``).

    A `Node`'s observer closes first when the node closes (``RuntimeError``
    for a node closed already); ``close()`` stops it sooner.  ``port=0``
    picks a free port."""
    started: list[Observer] = []

    def close_started() -> None:
        for web in started:
            web.close()

    on_close = getattr(target, "on_close", None)  # a Node has it; an Attached view does not
    if on_close is not None:
        # Hooked before anything starts: a closed node refuses here
        # (RuntimeError), and a node that closes from now on closes this observer.
        on_close(close_started)
    try:
        server = importlib.import_module("actors.tools.observer.server")
    except ModuleNotFoundError as exc:
        raise RuntimeError(f"{EXTRA_HINT} ({exc})") from exc
    observer = server.Observer(target, port=port, host=host, token=token, interval=interval).start()
    started.append(observer)
    return observer
