"""The command line's argument types: what ``otpy``'s options accept.

Each is an argparse ``type=``: it turns the text into a value or raises
`argparse.ArgumentTypeError` with a message naming what was wrong, which
argparse prefixes with the option ("argument --x:").  Pure functions, apart
from the parsers that use them (`cli_parsers`).
"""

from __future__ import annotations

import argparse
import math

__all__ = ["count", "per_second", "per_second_or_zero", "port", "seconds", "seed", "store"]


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if math.isnan(value) or math.isinf(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def seconds(text: str) -> float:
    """A duration: a finite number of seconds > 0."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def per_second(text: str) -> float:
    """A rate: a finite number per second > 0."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a rate per second > 0, got {text!r}")
    return value


def per_second_or_zero(text: str) -> float:
    """A rate: a finite number per second >= 0 (0: never)."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a rate per second >= 0, got {text!r}")
    return value


def count(text: str) -> int:
    """A count: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port: 0 (pick a free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0..65535, got {text!r}")
    return value


def store(text: str) -> str:
    """``sqlite``, ``postgres`` or a ``postgresql://`` URL (never echoed: it may hold a password)."""
    if text in ("sqlite", "postgres") or text.startswith(("postgresql://", "postgres://")):
        return text
    raise argparse.ArgumentTypeError("must be sqlite, postgres or a postgresql:// URL")


def seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
