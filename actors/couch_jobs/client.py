"""Calls any process makes to ``couch_jobs_server`` (the seed's exported server API).

The server is found through this process's `ProcessAgent` (which asks the
node's registry), so the functions work from every process of the node.
They sit below the actors: a module that needs the server calls these, not
the server module.
"""

from __future__ import annotations

from actors import ActorRef, Exit

from .attachment import attachment
from .model import JobType, encode_type
from .naming import SERVER_NAME

__all__ = ["CALL_TIMEOUT", "force_check_types", "get_notifier_server", "server"]

#: Seconds a caller waits for the server (the seed's ``infinity``, bounded).
CALL_TIMEOUT = 60.0


def server() -> ActorRef:
    """The running ``couch_jobs_server``; `Exit` (``noproc``) when there is none."""
    att = attachment()
    if att is None or att.agent is None:
        raise Exit("noproc", "couch_jobs is not attached in this process")
    ref = att.agent.call(["whereis", SERVER_NAME], timeout=CALL_TIMEOUT)
    if ref is None:
        raise Exit("noproc", f"{SERVER_NAME} is not running")
    return ref


def force_check_types() -> None:
    """Make the server look for new and removed types now (the seed's ``force_check_types``)."""
    server().call("check_types", timeout=CALL_TIMEOUT)


def get_notifier_server(job_type: JobType) -> ActorRef | None:
    """The notifier actor of ``job_type``, checking types once if it is unknown; None if none."""
    key = encode_type(job_type)
    for attempt in range(2):  # once more if the server restarted under us
        try:
            return server().call(["get_notifier_server", key], timeout=CALL_TIMEOUT)
        except Exit:
            if attempt:
                raise
    return None
