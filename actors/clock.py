"""Injected time, so policy and actors can be driven by a fake clock in tests.

The public face of `actors._core.base.clock`: programs import this module; the kernel imports that one.
"""

from actors._core.base.clock import *  # noqa: F403
from actors._core.base.clock import __all__ as __all__
