"""Ctrl-C and SIGTERM for the command line: stop the work, report, clean up, exit 130 or 143.

The public face of `actors._core.node.interrupt`: programs import this module; the kernel imports that one.
"""

from actors._core.node.interrupt import *  # noqa: F403
from actors._core.node.interrupt import STOP_SIGNALS as STOP_SIGNALS
from actors._core.node.interrupt import __all__ as __all__
from actors._core.node.interrupt import stop_once as stop_once
from actors._core.node.interrupt import wait_for_signal as wait_for_signal
