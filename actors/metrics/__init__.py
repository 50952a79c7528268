"""A node's metrics in Prometheus' text format (docs/metrics.md).

`Node(metrics=PORT)` (or ``[metrics] port``) serves ``/metrics``; the
mapping from the node's recorded names to Prometheus names is
`actors.metrics.names`, the families of one scrape `actors.metrics.families`.
"""

from actors.metrics.names import PREFIX, map_name, safe_name
from actors.metrics.server import DEFAULT_BIND, MetricsServer

__all__ = ["DEFAULT_BIND", "MetricsServer", "PREFIX", "map_name", "safe_name"]
