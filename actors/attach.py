"""Attach to a running node from another program, through its runtime directory.

`Attached(rundir)` is a view of a node started elsewhere (``otpy node``, a
program embedding `Node`): its actors, stats and peers, calls to its actors,
and ``kill``/``exit`` on request (``otpy status``, the observer).
"""

from actors._core.node.attach import Attached as Attached
from actors._core.node.attach import NotANode as NotANode
from actors._core.node.attach import read_node_file as read_node_file

__all__ = ["Attached", "NotANode", "read_node_file"]
