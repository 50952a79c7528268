"""The node a program holds: `Node` (its implementation is the kernel's, in `actors._core.node`)."""

from __future__ import annotations

from actors._core.node.node import Node

__all__ = ["Node"]
