"""Unpickling that builds plain data only: for frames from nodes not trusted with code.

A pickle is a small program: unpickling one may import any module and call
any function it names, so a frame from another node is as trusted as that
node.  By default that is the cluster key's promise (only holders of the
key connect, as with Erlang's cookie).  With ``[cluster] trust_peers =
false`` a node unpickles what other nodes send with `loads_plain`, which
builds plain data -- str, bytes, numbers, None, bools, and tuples, lists,
dicts, sets of those, which pickle encodes without naming anything -- and
the few records of our own that messages between nodes carry (an actor's
ref, a call's sender, a crash's reason), and nothing else: a body that
names any other class or function is not built at all, and the caller gets
`REFUSED` instead of the body.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

__all__ = ["REFUSED", "Refused", "loads_plain"]

#: ``(module, name)`` of the only globals a plain body may name: records
#: with plain fields, which build no code and run none when made.
_ALLOWED = frozenset(
    {
        ("actors._core.wire.ref", "ActorRef"),
        ("actors._core.wire.ref", "From"),
        ("actors._core.wire.reasons", "Crash"),
    }
)


class Refused:
    """What `loads_plain` gives for a body that names a class or function
    other than the allowed records; ``what`` says which (``module.name``)."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __repr__(self) -> str:
        return f"<refused pickled body: it names {self.what}>"


#: The reason a call whose request or answer was refused fails with.
REFUSED = "refused"


class _NotPlain(Exception):
    pass


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise _NotPlain(f"{module}.{name}")
        return super().find_class(module, name)


def loads_plain(data: bytes | memoryview) -> Any:
    """The value pickled in ``data`` if it is plain data (module docstring), else a `Refused`."""
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except _NotPlain as exc:
        return Refused(str(exc))
