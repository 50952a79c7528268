"""Where the command line's log records go, and in what shape: plain lines or JSON.

The library itself configures no logging (an embedding program decides);
the commands do.  `configure` puts one handler on the root logger, writing
to stderr, where a service manager (systemd's journal) or a terminal takes
it: the plain format is one line per record, ``TIME LEVEL LOGGER: MESSAGE``;
the JSON format is one object per line, for log shippers::

    {"time": "2026-11-29T06:02:45.938Z", "level": "WARNING", "logger": "actors.node",
     "node": "n2", "incarnation": "n2@7fd5d313eaa188fe",
     "message": "nodedown: node n1 (incarnation 2b32df2f84eb7dcf) is down (net_tick_timeout): ...",
     "peer": "n1", "reason": "net_tick_timeout"}

Beside the standard keys, an object carries the record's own fields (the
``extra`` its logger gave: ``peer``, ``reason``, ``child_id``,
``supervisor``, ...) as JSON values, or as their ``repr`` when they are not
plain data, each cut to `MAX_FIELD` characters, and ``exception`` with the
traceback when there is one.  ``node`` and ``incarnation`` come from
`stamp_node`: the node the command runs, read as each record is written, so a
node that starts a new incarnation in place is named by its current one.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import orjson

__all__ = ["FORMATS", "MAX_FIELD", "JsonFormatter", "configure", "stamp_node"]

#: The formats a command accepts (``--log-format``, ``[log] format``).
FORMATS = ("plain", "json")
#: A field's text is cut to this many characters (a reason may be a large value).
MAX_FIELD = 2000
#: The plain format: one line per record (a traceback follows on lines of its own).
PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# A record's attributes that are not fields of the event (LogRecord's own, and what formatting adds).
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "node", "incarnation"}
_PLAIN_TYPES = (str, int, float, bool, type(None))


def _plain(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-ready plain data, or its ``repr`` (cut to `MAX_FIELD`)."""
    if isinstance(value, str):
        return value if len(value) <= MAX_FIELD else value[:MAX_FIELD] + "..."
    if isinstance(value, _PLAIN_TYPES):
        return value
    if depth < 3 and isinstance(value, (list, tuple)) and len(value) <= 50:
        return [_plain(v, depth + 1) for v in value]
    if depth < 3 and isinstance(value, dict) and len(value) <= 50 and all(isinstance(k, str) for k in value):
        return {k: _plain(v, depth + 1) for k, v in value.items()}
    text = repr(value)
    return text if len(text) <= MAX_FIELD else text[:MAX_FIELD] + "..."


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module's docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "node": getattr(record, "node", None),
            "incarnation": getattr(record, "incarnation", None),
            "message": _plain(record.getMessage()),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_") and key not in out:
                out[key] = _plain(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exception"] = _plain(record.exc_text)
        return orjson.dumps(out, default=repr).decode()


class _NodeStamp(logging.Filter):
    """Stamps ``node`` and ``incarnation`` on every record, from ``source()`` as it is written."""

    def __init__(self, source: Callable[[], tuple[str | None, str | None]]) -> None:
        super().__init__()
        self.source = source

    def filter(self, record: logging.LogRecord) -> bool:
        record.node, record.incarnation = self.source()
        return True


def configure(level: str | int, fmt: str = "plain", stream: TextIO | None = None) -> logging.Handler | None:
    """One handler on the root logger at ``level``, in format ``fmt`` (`FORMATS`), to
    ``stream`` (stderr); it replaces the one an earlier call installed.  Returns it.

    As `logging.basicConfig` does, it leaves alone a root logger that a program
    configured already (a command run inside a program, or a test): None then."""
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    root = logging.getLogger()
    if any(not getattr(h, "_otpy", False) for h in root.handlers):
        return None
    for old in [h for h in root.handlers if getattr(h, "_otpy", False)]:
        root.removeHandler(old)
        old.close()
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(PLAIN))
    handler._otpy = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level if isinstance(level, int) else getattr(logging, str(level).upper()))
    return handler


def stamp_node(source: Callable[[], tuple[str | None, str | None]]) -> None:
    """Stamp ``(node name, incarnation)`` from ``source`` on what the `configure` handlers write."""
    for handler in logging.getLogger().handlers:
        if getattr(handler, "_otpy", False):
            for old in [f for f in handler.filters if isinstance(f, _NodeStamp)]:
                handler.removeFilter(old)
            handler.addFilter(_NodeStamp(source))
