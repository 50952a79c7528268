"""The document store on real temporary SQLite files, and the same tests on PostgreSQL."""

from __future__ import annotations

import pytest

from actors.replicator.docstore import Conflict, DatabaseNotFound, Doc, DocStore, DocStoreError, rev_rank

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path):
    if request.param == "sqlite":
        store = DocStore(tmp_path / "a.db", create=True)
    else:
        from actors.replicator.docstore_pg import PgDocStore

        store = PgDocStore(request.getfixturevalue("postgres_url"), "a", create=True)
    with store:
        yield store


def test_missing_database_is_a_clear_error(tmp_path):
    with pytest.raises(DatabaseNotFound, match="could not open .*nope.db"):
        DocStore(tmp_path / "nope.db")


def test_not_a_docstore_file(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(DocStoreError, match="not a document store"):
        DocStore(path)


def test_put_get_and_revisions(db):
    rev1 = db.put("a", {"x": 1})
    assert rev_rank(rev1)[0] == 1
    assert db.get("a") == Doc("a", rev1, {"x": 1})
    with pytest.raises(Conflict, match="'a'"):
        db.put("a", {"x": 2})
    rev2 = db.put("a", {"x": 2}, rev1)
    assert rev_rank(rev2)[0] == 2
    rev3 = db.delete("a", rev2)
    assert db.get("a") is None
    assert db.get("a", include_deleted=True).deleted
    assert db.put("a", {"x": 3}) != rev3
    with pytest.raises(ValueError, match="_local"):
        db.put("_local/x", {})
    with pytest.raises(ValueError, match="non-empty"):
        db.put("", {})


def test_changes_feed_orders_by_sequence_and_shows_latest_only(db):
    r = {d: db.put(d, {"n": i}) for i, d in enumerate("abc")}
    db.put("a", {"n": 9}, r["a"])
    changes = db.changes()
    assert [c.id for c in changes] == ["b", "c", "a"]
    assert [c.seq for c in changes] == [2, 3, 4]
    assert db.update_seq == 4
    assert [c.id for c in db.changes(since=2, limit=1)] == ["c"]
    with pytest.raises(ValueError, match="since"):
        db.changes(since=-1)


def test_bulk_docs_keeps_winners_and_is_idempotent(tmp_path, db):
    rev = db.put("a", {"v": 1})
    with DocStore(tmp_path / "b.db", create=True) as other:
        assert other.revs_diff({"a": rev}) == {"a": rev}
        assert other.bulk_docs([db.get("a")]) == 1
        assert other.bulk_docs([db.get("a")]) == 0
        assert other.revs_diff({"a": rev}) == {}
        assert other.get("a").rev == rev
        # an older revision never replaces a newer one
        rev2 = other.put("a", {"v": 2}, rev)
        assert other.bulk_docs([Doc("a", rev, {"v": 1})]) == 0
        assert other.get("a").rev == rev2


def test_local_docs_are_not_in_the_changes_feed(db):
    assert db.get_local("_local/cp") is None
    assert db.put_local("_local/cp", {"seq": 1}) == "0-1"
    assert db.put_local("cp", {"seq": 2}) == "0-2"
    assert db.get_local("_local/cp").body == {"seq": 2}
    assert db.changes() == []
    assert db.info()["doc_count"] == 0


def test_writes_survive_reopen_and_instance_start_time_changes(tmp_path):
    path = tmp_path / "c.db"
    with DocStore(path, create=True) as db:
        db.put("a", {"x": 1})
        first = db.ensure_full_commit()
    with DocStore(path) as db:
        assert db.get("a").body == {"x": 1}
        assert db.ensure_full_commit() != first


def test_closed_store_refuses_work(tmp_path):
    db = DocStore(tmp_path / "d.db", create=True)
    db.close()
    with pytest.raises(DocStoreError, match="closed"):
        db.put("a", {})


def test_a_file_of_the_first_layout_opens_with_its_documents(tmp_path):
    """A database written before the shared SQL layer (tables docs/local_docs/meta) keeps
    its documents, _local checkpoints and sequence, and new writes continue the sequence."""
    import sqlite3

    import orjson

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE docs (id TEXT PRIMARY KEY, rev TEXT NOT NULL, body BLOB NOT NULL,"
        " deleted INTEGER NOT NULL DEFAULT 0, seq INTEGER NOT NULL UNIQUE);"
        "CREATE TABLE local_docs (id TEXT PRIMARY KEY, rev INTEGER NOT NULL, body BLOB NOT NULL);"
    )
    conn.execute("INSERT INTO meta VALUES ('update_seq', '3')")
    conn.execute("INSERT INTO docs VALUES ('a', '2-aa', ?, 0, 2)", (orjson.dumps({"x": 1}),))
    conn.execute("INSERT INTO docs VALUES ('b', '1-bb', ?, 1, 3)", (orjson.dumps({}),))
    conn.execute("INSERT INTO local_docs VALUES ('ckpt', 4, ?)", (orjson.dumps({"seq": 2}),))
    conn.commit()
    conn.close()

    with DocStore(path) as store:
        assert store.get("a") == Doc("a", "2-aa", {"x": 1})
        assert store.get("b") is None and store.get("b", include_deleted=True).deleted
        assert store.get_local("_local/ckpt").body == {"seq": 2}
        assert store.update_seq == 3
        assert [c.id for c in store.changes()] == ["a", "b"]
        store.put("c", {"y": 2})
        assert store.changes(since=3)[0].seq == 4
    with DocStore(path) as again:  # opening twice moves nothing twice
        assert [c.id for c in again.changes()] == ["a", "b", "c"]
