"""The gen_server behaviour: thin callbacks over the kernel's generic loop.

The public face of `actors._core.cell.gen_server`: programs import this module; the kernel imports that one.
"""

from actors._core.cell.gen_server import *  # noqa: F403
from actors._core.cell.gen_server import __all__ as __all__
