"""Links between nodes: the CurveZMQ handshake, ticks, seeds, keys, a host's own connections."""
