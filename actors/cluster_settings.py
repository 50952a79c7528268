"""The ``[cluster]`` section: who this node is on the network and whom it joins.

The public face of `actors._core.net.settings`: programs import this module; the kernel imports that one.
"""

from actors._core.net.settings import *  # noqa: F403
from actors._core.net.settings import KEYS as KEYS
from actors._core.net.settings import __all__ as __all__
