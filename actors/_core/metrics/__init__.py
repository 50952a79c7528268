"""A node's metrics in Prometheus' text format: the names, the families of a scrape, the collector, the server."""
