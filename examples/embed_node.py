"""Embed the whole node in a host program: three lines to start it, one to stop it.

Run: ``python examples/embed_node.py [couch.ini]``.  Without a config file
the app uses the seeds' defaults and a fresh temporary state directory.
"""

import sys

from actors import Node
from actors.couch import start_app
from actors.tree import render_tree

if __name__ == "__main__":
    node = Node()                                                     # 1. the actor system
    app = start_app(node, sys.argv[1] if len(sys.argv) > 1 else None)  # 2. IOQ, couch_jobs, smoosh, replicator
    print("\n".join(render_tree(node.actors())))                      # 3. use it (here: look at it)
    app.stop()
    node.close()
