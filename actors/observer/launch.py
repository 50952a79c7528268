"""`Node.observe` lands here: start an observer for a node or an attached view.

The kernel imports this module and nothing else of the observer; it
imports nothing of the kernel.  The web server and its libraries
(Starlette, uvicorn, psutil) are the optional ``[observer]`` extra, so they
are loaded when an observer is asked for, not when `actors` is imported,
and a missing extra is reported with the command that installs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.observer.server import Observer

__all__ = ["observe"]

EXTRA_HINT = "the observer needs its extra: pip install 'otpy-actors[observer]'"


def observe(target: Any, port: int = 8421, host: str = "127.0.0.1", token: str | None = None,
            interval: float = 0.5) -> "Observer":
    """Serve the observer page for ``target`` (a `Node` or `actors.attach.Attached`); returns the
    running `actors.observer.server.Observer` (``.url``, ``.close()``)."""
    try:
        server = importlib.import_module("actors.observer.server")
    except ModuleNotFoundError as exc:
        raise RuntimeError(f"{EXTRA_HINT} ({exc})") from exc
    return server.Observer(target, port=port, host=host, token=token, interval=interval).start()
