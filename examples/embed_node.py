"""Embed the whole node in a host program: three lines to start it, one to stop it.

Run: ``python examples/embed_node.py [couch.ini]``.  Without a config file
the app uses the seeds' defaults and a fresh temporary state directory.
A config file that does not exist is reported in one line (exit status 2).
"""

import os
import sys

if __package__ in (None, ""):  # run as a script from a checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from actors import Node  # noqa: E402
from actors.app.couch import start_app  # noqa: E402
from actors.tree import render_tree  # noqa: E402


def main(argv: list[str]) -> int:
    config = argv[1] if len(argv) > 1 else None
    if config is not None and not os.path.isfile(config):
        print(f"{argv[0]}: error: config file not found: {config}", file=sys.stderr)
        return 2
    with Node() as node:  # 1. the actor system (closed by the with)
        app = start_app(node, config)  # 2. IOQ, couch_jobs, smoosh, replicator
        try:
            print("\n".join(render_tree(node.actors())))  # 3. use it (here: look at it)
        finally:
            app.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
