"""The ``_replicator`` database: replication documents, and the jobs they describe.

Upstream, every node's ``couch_replicator_doc_processor`` reads the
``_replicator`` databases (through ``couch_multidb_changes``) and turns each
document into a ``#rep{}``; the clustering layer then decides which node
runs it.  Here the ``_replicator`` database is a `DocStore` file that every
node opens: on one machine the same file, which is what makes the cluster
share it; nodes on several machines share it in PostgreSQL instead (a
``postgresql://`` URL where a path would go: the ``_replicator`` database of
that store, see `stores`).

A document::

    {"source": "/data/a.sqlite", "target": "/data/b.sqlite",
     "continuous": true, "create_target": true, "worker_batch_size": 100}

`rep_from_doc` is pure: a document in, a `Rep` (or a `BadReplicationDoc`
naming what is wrong) out.  The job id is the replication id, a digest of
source, target and the options that change what is replicated (upstream's
``couch_replicator_ids``), so the same document gives the same id, and the
same checkpoint (``_local/<id>`` in both stores), on every node.  The
ownership key is ``"<db>/<doc id>"`` as `clustering.job_key` makes it.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping
from typing import Any

import orjson

from .docs_model import Change, Conflict, StoreUnavailable
from .docstore_sql import SQLDocStore
from .records import Rep
from .stores import open_replicator_db

__all__ = [
    "BadReplicationDoc",
    "DB_NAME",
    "ReplicatorDb",
    "delete_replication",
    "put_replication",
    "rep_from_doc",
    "replication_id",
]

log = logging.getLogger("actors.replicator.replicator_db")

#: The name jobs made from documents carry as ``Rep.db_name``.
DB_NAME = "_replicator"

#: Options that do not change what a replication writes, so not part of its id.
_NOT_IN_ID = frozenset({"checkpoint_interval", "worker_processes", "worker_batch_size", "http_connections"})
#: Document fields that are not options.
_NOT_OPTIONS = frozenset({"source", "target", "owner", "_replication_state"})


class BadReplicationDoc(ValueError):
    """A replication document that cannot become a job; names the document and the field."""

    def __init__(self, doc_id: str, why: str) -> None:
        super().__init__(f"replication document {doc_id!r}: {why}")
        self.doc_id = doc_id


def replication_id(source: str, target: str, options: Mapping[str, Any]) -> str:
    """A stable id for a replication: md5 of source, target and the options that matter,
    with ``+continuous`` appended for continuous ones (upstream's id shape)."""
    kept = {k: v for k, v in options.items() if k not in _NOT_IN_ID and k != "continuous"}
    digest = hashlib.md5(orjson.dumps([source, target, kept], option=orjson.OPT_SORT_KEYS)).hexdigest()
    return digest + ("+continuous" if options.get("continuous") else "")


def rep_from_doc(doc_id: str, body: Mapping[str, Any], db_name: str = DB_NAME) -> Rep:
    """The job a replication document describes."""
    if not isinstance(body, Mapping):
        raise BadReplicationDoc(doc_id, f"body must be an object, got {type(body).__name__}")
    for field in ("source", "target"):
        value = body.get(field)
        if not isinstance(value, str) or not value:
            raise BadReplicationDoc(doc_id, f"{field} must be a non-empty string, got {value!r}")
    options = {k: v for k, v in body.items() if k not in _NOT_OPTIONS}
    for key in ("continuous", "create_target"):
        if key in options and not isinstance(options[key], bool):
            raise BadReplicationDoc(doc_id, f"{key} must be true or false, got {options[key]!r}")
    owner = body.get("owner")
    if owner is not None and not isinstance(owner, str):
        raise BadReplicationDoc(doc_id, f"owner must be a string, got {owner!r}")
    rep_id = replication_id(body["source"], body["target"], options)
    return Rep(
        id=rep_id,
        source=body["source"],
        target=body["target"],
        options=options,
        db_name=db_name,
        doc_id=doc_id,
        user=owner,
    )


class ReplicatorDb:
    """Reads a ``_replicator`` database's changes feed into the current set of documents.

    `poll` returns the documents changed since the last poll: ``doc id ->
    body`` for live ones and ``doc id -> None`` for deleted ones.  It opens
    the database on first use (creating it), so a node may start before anyone
    wrote a document.  ``path`` is a SQLite file or a PostgreSQL store URL.
    While the store is unreachable a poll logs it and returns nothing new
    (the next one reconnects): the documents already read stay in force.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._store: SQLDocStore | None = None
        self.since = 0
        self.unreachable: str | None = None

    def _open(self) -> SQLDocStore:
        if self._store is None:
            self._store = open_replicator_db(self.path)
        return self._store

    def poll(self, limit: int | None = None) -> dict[str, dict | None]:
        changed: dict[str, dict | None] = {}
        try:
            store = self._open()
            changes: list[Change] = store.changes(self.since, limit=limit)
            for change in changes:
                doc = None if change.deleted else store.get(change.id)
                changed[change.id] = None if doc is None else doc.body
                self.since = change.seq
        except StoreUnavailable as exc:
            if self.unreachable is None:
                log.warning("the _replicator database is unreachable: %s", exc)
            self.unreachable = str(exc)
            return changed  # what was read before the store went away (``since`` is past it)
        self.unreachable = None
        return changed

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def put_replication(
    path: str | os.PathLike[str], doc_id: str, source: str, target: str, *, continuous: bool = False, **options: Any
) -> str:
    """Write (or replace) a replication document in the ``_replicator`` database at ``path``
    (a SQLite file, or a PostgreSQL store URL); returns its new revision.  The document
    is checked first (`BadReplicationDoc`)."""
    body = {"source": source, "target": target, "continuous": continuous, **options}
    rep_from_doc(doc_id, body)
    with open_replicator_db(path) as store:
        for _ in range(10):  # another writer may replace it between our read and write
            current = store.get(doc_id)
            try:
                return store.put(doc_id, body, current.rev if current else None)
            except Conflict:
                continue
    raise Conflict(doc_id, None, "still changing after 10 tries")


def delete_replication(path: str | os.PathLike[str], doc_id: str) -> bool:
    """Delete a replication document; False when there was none.  Its job stops on
    whichever node runs it."""
    with open_replicator_db(path) as store:
        current = store.get(doc_id)
        if current is None:
            return False
        store.delete(doc_id, current.rev)
        return True
