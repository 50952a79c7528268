"""Counters, gauges and histograms named as in the seeds.

The public face of `actors._core.base.stats`: programs import this module; the kernel imports that one.
"""

from actors._core.base.stats import *  # noqa: F403
from actors._core.base.stats import __all__ as __all__
