"""A node's metrics in Prometheus' text format (docs/metrics.md).

`Node(metrics=PORT)` (or ``[metrics] port``) serves ``/metrics``;
`map_name` is the mapping from the node's recorded names to Prometheus
names.  The implementation is the kernel's (``actors._core.metrics``).
"""

from actors._core.metrics.names import PREFIX, map_name, safe_name
from actors._core.metrics.server import DEFAULT_BIND, MetricsServer

__all__ = ["DEFAULT_BIND", "MetricsServer", "PREFIX", "map_name", "safe_name"]
