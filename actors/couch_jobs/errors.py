"""The seed's ``{error, ...}`` results, as exceptions.

couch_jobs returns ``{error, no_type_timeout}``, ``{error, {json_encoding_error,
_}}``, ``{error, not_found}`` and ``{error, halt}``; a Python caller would
have to check every result, so each becomes an exception instead.  They share
a base class so a worker loop can catch "anything couch_jobs refused" in one
clause, and each also derives from the closest built-in so generic handlers
(``except LookupError``) still work.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CouchJobsError",
    "Halt",
    "JsonEncodingError",
    "NoTypeTimeout",
    "NotFound",
    "StoreClosed",
    "StoreReadOnly",
    "StoreUnavailable",
]


class CouchJobsError(Exception):
    """Base class of every error couch_jobs raises on purpose."""


class NoTypeTimeout(CouchJobsError, LookupError):
    """``add`` of a job whose type has no activity timeout (``{error, no_type_timeout}``).

    A type must have a timeout before jobs of it may exist, because the
    activity monitor needs it to re-enqueue jobs of dead workers.
    """

    def __init__(self, job_type: Any) -> None:
        super().__init__(f"job type {job_type!r} has no activity timeout; call set_type_timeout first")
        self.job_type = job_type


class JsonEncodingError(CouchJobsError, ValueError):
    """Job data that is not a JSON object with string keys (``{json_encoding_error, _}``)."""


class NotFound(CouchJobsError, LookupError):
    """No such job, no such type, or nothing to accept before the timeout (``{error, not_found}``)."""


class Halt(CouchJobsError):
    """The worker's lock on the job is gone (``{error, halt}``).

    The job was re-enqueued by the activity monitor (the worker was too slow
    to report progress) or removed; the worker must stop working on it and
    must not retry the write.
    """


class StoreClosed(CouchJobsError, RuntimeError):
    """A call on a job store after ``close()``.

    Raised instead of touching a closed connection: an actor still running
    when its store is closed gets this clear error, never a crash.
    """


class StoreReadOnly(CouchJobsError, PermissionError):
    """A writing transaction on a store opened with ``read_only=True`` (a monitor's view)."""


class StoreUnavailable(CouchJobsError, ConnectionError):
    """The job store cannot be reached (a PostgreSQL server stopped, a bad URL).

    The message names the store (its URL without the password).  Nothing
    the caller saw committed is lost; a call that raised this may or may not
    have committed, as with any lost connection, and may be retried.
    """
