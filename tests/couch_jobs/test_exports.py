"""Pin the public surface of actors.couch_jobs."""

import actors.couch_jobs as couch_jobs

SEED_API = {
    "add",
    "remove",
    "get_job_data",
    "get_job_state",
    "accept",
    "finish",
    "resubmit",
    "is_resubmitted",
    "update",
    "subscribe",
    "unsubscribe",
    "wait",
    "set_type_timeout",
    "clear_type_timeout",
    "get_type_timeout",
    "get_job",
    "get_jobs",
}
ERRORS = {"CouchJobsError", "NoTypeTimeout", "JsonEncodingError", "NotFound", "Halt"}


def test_seed_names_and_errors_are_exported():
    assert SEED_API | ERRORS <= set(couch_jobs.__all__)
    for name in couch_jobs.__all__:
        assert hasattr(couch_jobs, name), name


def test_errors_share_a_base_and_builtin_kinds():
    assert all(issubclass(getattr(couch_jobs, e), couch_jobs.CouchJobsError) for e in ERRORS)
    assert issubclass(couch_jobs.NotFound, LookupError)
    assert issubclass(couch_jobs.JsonEncodingError, ValueError)
