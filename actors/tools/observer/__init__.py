"""The observer: a live web page of a running node, where a user watches the tree and kills actors.

``python -m actors observe RUNDIR``, ``python -m actors demo --observe``, or
``node.observe(port=...)`` from a program.  See docs/observer.md.
"""

from actors.tools.observer.launch import observe

__all__ = ["observe"]
