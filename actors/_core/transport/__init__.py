"""A process's ZeroMQ endpoint: frames in and out, batching, the endpoint lent to an actor."""
