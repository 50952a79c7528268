"""Helpers that make real SQLite files with free pages for the smoosh tests."""

from __future__ import annotations

import os
import sqlite3


def make_db(path: str, rows: int = 2000, row_bytes: int = 4096, keep_every: int = 10, page_size: int = 4096) -> None:
    """A database with ``rows`` blobs, of which all but every ``keep_every``-th are deleted.

    Deleting without VACUUM leaves the pages on SQLite's freelist, so the
    file is several times larger than its live data.
    """
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute(f"PRAGMA page_size={page_size}")
        con.execute("CREATE TABLE docs (id INTEGER PRIMARY KEY, body BLOB)")
        con.execute("BEGIN")
        con.executemany("INSERT INTO docs (body) VALUES (?)", ((os.urandom(row_bytes),) for _ in range(rows)))
        con.execute("COMMIT")
        con.execute("DELETE FROM docs WHERE id % ? != 0", (keep_every,))
    finally:
        con.close()


def grow_db(path: str, rows: int = 100, row_bytes: int = 4096) -> None:
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("CREATE TABLE IF NOT EXISTS docs (id INTEGER PRIMARY KEY, body BLOB)")
        con.execute("BEGIN")
        con.executemany("INSERT INTO docs (body) VALUES (?)", ((os.urandom(row_bytes),) for _ in range(rows)))
        con.execute("COMMIT")
    finally:
        con.close()


def delete_rows(path: str, keep_every: int = 10) -> None:
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("DELETE FROM docs WHERE id % ? != 0", (keep_every,))
    finally:
        con.close()


def row_count(path: str) -> int:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT count(*) FROM docs").fetchone()[0]
    finally:
        con.close()
