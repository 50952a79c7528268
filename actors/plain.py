"""`PlainData`: a message its sender vouches is plain data, so it travels as
JSON without the check the kernel would otherwise walk it with.

For hot paths that know their message's shape (IOQ's callers send every
read this way); see *Frames* in ``docs/kernel.md`` for the bargain.
"""

from __future__ import annotations

from actors._core.wire.codec import PlainData

__all__ = ["PlainData"]
