"""Pin the names actors.ioq exports."""

import actors.ioq as ioq


def test_exported_names():
    assert sorted(ioq.__all__) == sorted(
        [
            "BAD_MAGIC_NUM",
            "Completion",
            "Empty",
            "FileTarget",
            "FileTargetError",
            "Full",
            "HQueue",
            "HQueueError",
            "InvalidPriority",
            "IoTargetDown",
            "Ioq1Request",
            "Ioq1Settings",
            "Ioq1State",
            "Ioq2Settings",
            "Ioq2State",
            "IoqRequest",
            "OsqRequest",
            "OsqState",
            "OsqSubmission",
            "add_request_dimensions",
            "choose_server",
            "current_cpu",
            "fd_hash",
            "get_queue_depths",
            "read_settings",
            "route",
            "server_name",
            "server_names",
            "sort_queues",
            # the actor layer
            "FileServer",
            "IoFailure",
            "Ioq1Server",
            "Ioq2Server",
            "IoqSup",
            "OsqServer",
            "call",
            "get_concurrency",
            "get_disk_concurrency",
            "get_disk_counters",
            "get_disk_queues",
            "get_osproc_queues",
            "get_osproc_requests",
            "set_concurrency",
            "set_disk_concurrency",
            "start_ioq",
        ]
    )
    for name in ioq.__all__:
        assert getattr(ioq, name) is not None, name
