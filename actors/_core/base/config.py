"""CouchDB-style configuration: ini sections of string keys and string values.

CouchDB's `config` application keeps every setting as a string and lets each
reader parse it, so a bad value only affects the reader that cares, and
settings changed at run time reach listeners the way the seeds'
`config:listen_for_changes` does.  This module keeps that model.

A `Config` is a plain, thread-safe object.  Each OS process of a node holds a
replica; the node pushes every change to all replicas, so reads never leave
the process.  `current()` returns the replica of the calling process.
"""

from __future__ import annotations

import configparser
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "Config",
    "ConfigError",
    "Listener",
    "current",
    "set_current",
]

#: ``listener(section, key, value, persist)``; ``value`` is ``None`` on delete.
Listener = Callable[[str, str, "str | None", bool], None]


class _CaseSensitiveParser(configparser.ConfigParser):
    """Keys are case sensitive, as in CouchDB (configparser lower-cases them)."""

    def optionxform(self, optionstr: str) -> str:
        return optionstr


class ConfigError(ValueError):
    """A configuration value could not be parsed; names section, key and value."""


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class Config:
    """Sections of string settings with typed getters and change listeners."""

    def __init__(self, sections: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._lock = threading.RLock()
        self._sections: dict[str, dict[str, str]] = {}
        self._listeners: dict[int, Listener] = {}
        self._next_listener = 0
        self._ini_path: str | None = None
        for section, values in (sections or {}).items():
            for key, value in values.items():
                self._sections.setdefault(section, {})[key] = _to_str(value)

    # -- loading -----------------------------------------------------------

    @classmethod
    def from_ini(cls, *paths: str | os.PathLike[str]) -> "Config":
        """Read ini files in order; later files override earlier ones.

        The last path is where `set(..., persist=True)` writes back.
        """
        cfg = cls()
        for path in paths:
            cfg.load_ini(path)
        return cfg

    def load_ini(self, path: str | os.PathLike[str]) -> None:
        parser = _CaseSensitiveParser(interpolation=None, strict=False)
        with open(path, encoding="utf-8") as fh:
            parser.read_file(fh, source=str(path))
        with self._lock:
            for section in parser.sections():
                for key, value in parser.items(section, raw=True):
                    self._sections.setdefault(section, {})[key] = value
            self._ini_path = os.fspath(path)

    def to_dict(self) -> dict[str, dict[str, str]]:
        with self._lock:
            return {s: dict(kv) for s, kv in self._sections.items()}

    # -- reading -----------------------------------------------------------

    def get(self, section: str, key: str, default: Any = None) -> Any:
        """The raw string value, or ``default`` (returned as given) when unset."""
        with self._lock:
            return self._sections.get(section, {}).get(key, default)

    def section(self, section: str) -> dict[str, str]:
        """A copy of one section, ``{}`` when absent (`config:get(Section)`)."""
        with self._lock:
            return dict(self._sections.get(section, {}))

    def sections(self) -> list[str]:
        with self._lock:
            return sorted(self._sections)

    def get_integer(self, section: str, key: str, default: int) -> int:
        raw = self.get(section, key)
        if raw is None:
            return default
        try:
            return int(str(raw).strip())
        except ValueError:
            raise ConfigError(f"[{section}] {key} = {raw!r} is not an integer") from None

    def get_float(self, section: str, key: str, default: float) -> float:
        raw = self.get(section, key)
        if raw is None:
            return default
        try:
            return float(str(raw).strip())
        except ValueError:
            raise ConfigError(f"[{section}] {key} = {raw!r} is not a number") from None

    def get_boolean(self, section: str, key: str, default: bool) -> bool:
        raw = self.get(section, key)
        if raw is None:
            return default
        text = str(raw).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ConfigError(f"[{section}] {key} = {raw!r} is not a boolean")

    # -- writing -----------------------------------------------------------

    def set(self, section: str, key: str, value: Any, persist: bool = False) -> None:
        """Set a value and tell listeners; ``persist`` also rewrites the ini file."""
        text = _to_str(value)
        with self._lock:
            self._sections.setdefault(section, {})[key] = text
            if persist:
                self._write_back()
            listeners = list(self._listeners.values())
        for listener in listeners:
            listener(section, key, text, persist)

    def delete(self, section: str, key: str, persist: bool = False) -> None:
        with self._lock:
            values = self._sections.get(section)
            if values is None or key not in values:
                return
            del values[key]
            if not values:
                del self._sections[section]
            if persist:
                self._write_back()
            listeners = list(self._listeners.values())
        for listener in listeners:
            listener(section, key, None, persist)

    def update(self, changes: Iterable[tuple[str, str, str | None]]) -> None:
        """Apply ``(section, key, value-or-None)`` changes, notifying listeners."""
        for section, key, value in changes:
            if value is None:
                self.delete(section, key)
            else:
                self.set(section, key, value)

    def _write_back(self) -> None:
        if self._ini_path is None:
            return
        parser = _CaseSensitiveParser(interpolation=None)
        for section, values in self._sections.items():
            parser[section] = values
        tmp = f"{self._ini_path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            parser.write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self._ini_path)

    # -- listening ---------------------------------------------------------

    def listen(self, listener: Listener) -> int:
        """Call ``listener`` on every change; returns a handle for `unlisten`."""
        with self._lock:
            handle = self._next_listener
            self._next_listener += 1
            self._listeners[handle] = listener
            return handle

    def unlisten(self, handle: int) -> None:
        with self._lock:
            self._listeners.pop(handle, None)


def _to_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_current = Config()
_current_lock = threading.Lock()


def current() -> Config:
    """The configuration replica of this OS process."""
    return _current


def set_current(cfg: Config) -> Config:
    """Install ``cfg`` as this process's replica; returns the previous one."""
    global _current
    with _current_lock:
        previous, _current = _current, cfg
    return previous
