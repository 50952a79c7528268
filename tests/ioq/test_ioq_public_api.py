"""Pin the names actors.ioq exports."""

import actors.ioq as ioq


def test_exported_names():
    assert sorted(ioq.__all__) == sorted([
        "BAD_MAGIC_NUM", "Completion", "Empty", "FileTarget", "FileTargetError", "Full",
        "HQueue", "HQueueError", "InvalidPriority", "IoTargetDown", "Ioq1Request",
        "Ioq1Settings", "Ioq1State", "Ioq2Settings", "Ioq2State", "IoqRequest", "OsqRequest",
        "OsqState", "OsqSubmission", "add_request_dimensions", "choose_server", "current_cpu",
        "fd_hash", "get_queue_depths", "read_settings", "route", "server_name", "server_names",
        "sort_queues",
    ])
    for name in ioq.__all__:
        assert getattr(ioq, name) is not None, name
