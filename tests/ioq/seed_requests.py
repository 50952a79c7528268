"""The seed's ioq_tests request mix, shared by the IOQ1, IOQ2 and actor tests:
every IO class against a spread of shard names, each as a priority tuple."""

from __future__ import annotations

from typing import Any

#: The seed's classes (IOQ2's list; IOQ1's tests leave out ``db_meta``).
IO_CLASSES = ["interactive", "view_update", "db_compact", "view_compact", "internal_repl", "other", "db_meta"]
SHARDS = [
    "shards/0-1/heroku/app928427/couchrest.1317609656.couch",
    "shards/0-1/foo",
    "shards/0-3/foo",
    "shards/0-1/bar",
    "shards/0-1/kocolosk/stats.1299297461.couch",
    "shards/0-1/kocolosk/my/db.1299297457.couch",
    "other",
]


def priority(io_class: str, shard: str) -> tuple[Any, ...]:
    """The priority a request of ``io_class`` on ``shard`` carries (a view
    update names its design doc too)."""
    if io_class == "view_update":
        return (io_class, shard, "_design/foo")
    return (io_class, shard)
