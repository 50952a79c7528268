"""Actors and state functions for the sys tests, importable by name in every process and node."""

from __future__ import annotations

from typing import Any

from actors import GenServer, noreply


class Vault(GenServer):
    """Counts what it is cast; its ``password`` is hidden by ``format_status``."""

    def init(self, password: str) -> None:
        self.password = password
        self.count = 0
        self.seen: list[Any] = []
        self._cache = object()  # private: not state

    def handle_cast(self, request: Any) -> None:
        self.count += 1
        self.seen.append(request)

    def handle_call(self, request: Any, from_: Any) -> Any:
        if request == "seen":
            return list(self.seen)
        if request == "later":
            self.reply(from_, "deferred")
            return noreply
        return (request, self.count)

    def format_status(self, status: dict[str, Any]) -> dict[str, Any]:
        state = dict(status["state"])
        state["password"] = "***"
        return {**status, "state": state}


def add_ten(state: dict[str, Any]) -> dict[str, Any]:
    return {**state, "count": state["count"] + 10}


def unlock_code(state_data: tuple[Any, dict[str, Any]]) -> tuple[Any, dict[str, Any]]:
    _, data = state_data
    return ("open", {**data, "code": [7]})


def not_a_dict(state: Any) -> Any:
    return 42


def explode(state: Any) -> Any:
    raise ValueError("no thanks")
