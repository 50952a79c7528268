"""``python -m actors`` and the ``otpy`` console script."""

from __future__ import annotations

import sys

from actors.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
