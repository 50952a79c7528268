"""An actor that reports which modules its host process has imported.

Kept apart from the other test actors so that spawning it imports nothing
but itself and `actors.gen_server`: what it reports is the host's, not ours.
"""

from __future__ import annotations

import sys
from typing import Any

from actors.gen_server import GenServer


class ModulesReport(GenServer):
    """Answers any call with the sorted names in this process's ``sys.modules``."""

    def handle_call(self, request: Any, from_: Any) -> list[str]:
        return sorted(sys.modules)
