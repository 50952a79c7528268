"""The cluster key file: the CurveZMQ keypair every node of one cluster shares.

``otpy keygen PATH`` writes one (mode 0600); ``Node(cluster_key=PATH)`` and
``[cluster] cluster_key`` read it.  Programs that set up clusters of their
own (tests, demos) write one with `write_new`.
"""

from actors._core.net.keys import ClusterKey as ClusterKey
from actors._core.net.keys import KeyFileError as KeyFileError
from actors._core.net.keys import generate as generate
from actors._core.net.keys import load as load
from actors._core.net.keys import write_new as write_new

__all__ = ["ClusterKey", "KeyFileError", "generate", "load", "write_new"]
