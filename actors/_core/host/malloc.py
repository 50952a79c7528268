"""glibc's allocator, set for processes that move big frames.

By default glibc serves an allocation of 128 KiB or more (a threshold it
raises, as big blocks are freed, up to 32 MiB, but lowers again as it trims)
with a fresh ``mmap`` and gives it back with ``munmap`` when freed.  A 1 MiB
message passes through several such buffers on its way (the frame, ZeroMQ's
copy of it, CurveZMQ's, the receiver's), and every fresh mapping is faulted
in page by page: measured on a 2-core machine, a 1 MiB send and receive
over an inproc pair cost 1,100-1,300 us that way against 60 us with the
buffers reused, for a memcpy of about 20 us.  A host therefore serves
blocks up to `MMAP_THRESHOLD` from its heap and keeps up to
`TRIM_THRESHOLD` of free heap instead of returning it at once, so the
buffers of a stream of big messages are reused, not faulted in again.

The cost is memory a host keeps after a burst: at most `TRIM_THRESHOLD` of
free heap above what it uses.  Elsewhere than glibc (musl, macOS) nothing
is changed.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "tune_for_big_frames"]

#: Blocks up to this size come from the heap, not a mapping of their own.
MMAP_THRESHOLD = 8 * 1024 * 1024
#: Free heap a process keeps before giving memory back to the system.
TRIM_THRESHOLD = 32 * 1024 * 1024

_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3


def tune_for_big_frames() -> bool:
    """Set this process's allocator as the module says; False where it is not glibc's."""
    try:
        if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return False
    except (ValueError, OSError):  # not a GNU system
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
