"""The namespace topology of the host tests (it lives in `actors.app.workload.netns`, which the demo uses too)."""

from actors.app.workload.netns import SUBNET, Host, Topology, missing, netns_pids, sweep_stale

__all__ = ["SUBNET", "Host", "Topology", "missing", "netns_pids", "sweep_stale"]
