"""The ``/metrics`` endpoint of a node: ``prometheus_client``'s HTTP server on its own registry.

Each node gets a registry of its own holding one `NodeCollector` (not the
client's global registry, whose process metrics describe whichever
program imported it), served by the client's threaded HTTP server on a
daemon thread.  Port 0 picks a free port; ``address`` says which.
"""

from __future__ import annotations

from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from actors._core.metrics.gather import NodeCollector
from actors._core.metrics.names import DEFAULT_BIND

__all__ = ["DEFAULT_BIND", "MetricsServer"]


class MetricsServer:
    """A running ``/metrics`` endpoint for one node; ``close()`` stops it."""

    def __init__(self, node: Any, port: int = 0, bind: str = DEFAULT_BIND, timeout: float = 2.0) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"metrics port must be 0..65535, got {port!r}")
        self.collector = NodeCollector(node, timeout=timeout)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        server, self._thread = start_http_server(port, addr=bind, registry=self.registry)
        self._server: WSGIServer | None = server
        host, bound = server.server_address[:2]
        #: ``(host, port)`` actually bound (the port the kernel chose when asked for 0).
        self.address: tuple[str, int] = (str(host), int(bound))

    @property
    def url(self) -> str:
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/metrics"

    def close(self) -> None:
        """Stop serving and release the port; idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        self._thread.join(5.0)
