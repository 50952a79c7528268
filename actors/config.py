"""CouchDB-style configuration: ini sections of string keys and string values.

The public face of `actors._core.base.config`: programs import this module; the kernel imports that one.
"""

from actors._core.base.config import *  # noqa: F403
from actors._core.base.config import __all__ as __all__
