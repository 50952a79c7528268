"""Payloads of the messaging bench's payload rows (importable by name in
every process of both nodes, so a dataclass travels by reference, as a
user's would from their own module)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

KB = 1024
MB = 1024 * 1024


@dataclass
class Order:
    """A small record, as a program would send one."""

    id: int
    customer: str
    lines: list[str]
    total: float


def payloads(text: str) -> dict[str, tuple[Any, int]]:
    """Row name -> (payload, the raw row's size in bytes it is compared with)."""
    return {
        "str 100 B": (text, 100),
        "bytes 100 B": (text.encode(), 100),
        "dict small": ({"id": 42, "customer": "ada", "lines": ["a", "b", "c"], "total": 12.5}, 100),
        "dataclass": (Order(42, "ada", ["a", "b", "c"], 12.5), 100),
        "bytes 64 KB": (bytes(64 * KB), 64 * KB),
        "bytes 1 MB": (bytes(MB), MB),
    }


#: Rows reported without a target (a dataclass is pickled, not plain data).
NO_TARGET = ("dataclass",)


def variant(payload: Any, i: int) -> Any:
    """Message ``i`` of a cast row: a distinct object of the same shape and
    size, as a program sends (the same object cast again would be pickled
    once per batch, a saving no real stream gets)."""
    if type(payload) is str:
        return payload[:-8] + f"{i & 0xFFFFFFF:08d}"
    if type(payload) is bytes:
        return i.to_bytes(8, "little") + payload[8:]
    if type(payload) is dict:
        return {**payload, "id": i}
    if isinstance(payload, Order):
        return replace(payload, id=i)
    return payload
