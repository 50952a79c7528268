"""Pin the actor layer's public names in actors.couch_jobs."""

import actors.couch_jobs as couch_jobs

ACTOR_LAYER = {
    "start",
    "stop",
    "use",
    "force_check_types",
    "get_notifier_server",
    "CouchJobsSup",
    "ActivityMonitorSup",
    "NotifierSup",
    "JobsServer",
    "ActivityMonitor",
    "Notifier",
    "TypeMonitor",
    "WakeupHub",
    "ProcessAgent",
}


def test_actor_layer_names_are_exported():
    assert ACTOR_LAYER <= set(couch_jobs.__all__)
    assert all(hasattr(couch_jobs, name) for name in ACTOR_LAYER)


def test_registered_names_are_the_seeds():
    from actors.couch_jobs import server, sup, wakeups

    assert server.SERVER_NAME == "couch_jobs_server"
    assert (sup.TOP_SUP, sup.ACTIVITY_MONITOR_SUP, sup.NOTIFIER_SUP) == (
        "couch_jobs_sup",
        "couch_jobs_activity_monitor_sup",
        "couch_jobs_notifier_sup",
    )
    assert wakeups.HUB_NAME == "couch_jobs_wakeups"
