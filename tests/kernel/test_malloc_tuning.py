"""Host processes take big blocks from the heap (`actors._core.host.malloc`),
so the buffers of a stream of big messages are reused, not mapped and faulted
in anew each time.  The first check runs in a child process, so this one
keeps its allocator as it was."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actors import GenServer, Node

ROOT = str(Path(__file__).resolve().parent.parent.parent)

glibc_only = pytest.mark.skipif(
    not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"), reason="glibc's allocator only"
)


def megabyte_mapped_alone() -> bool:
    """Whether a 1 MB block gets a mapping of its own (glibc's count of
    mapped blocks, ``mallinfo2().hblks``, goes up while it is held)."""

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks")
        ] + [(name, ctypes.c_size_t) for name in ("fordblks", "keepcost")]

    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = libc.mallinfo2().hblks
    block = libc.malloc(1 << 20)
    try:
        return bool(libc.mallinfo2().hblks > before)
    finally:
        libc.free(block)


PROBE = """
import sys
from actors._core.host.malloc import tune_for_big_frames
from tests.kernel.test_malloc_tuning import megabyte_mapped_alone
if sys.argv[1] == "tuned":
    assert tune_for_big_frames()
print(megabyte_mapped_alone())
"""


@glibc_only
@pytest.mark.parametrize("how, mapped_alone", [("default", "True"), ("tuned", "False")])
def test_a_tuned_process_takes_a_megabyte_from_the_heap(how: str, mapped_alone: str) -> None:
    env = dict(os.environ, PYTHONPATH=ROOT)
    for var in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        env.pop(var, None)
    out = subprocess.run([sys.executable, "-c", PROBE, how], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == mapped_alone


class HeapProbe(GenServer):
    def handle_call(self, request: object, from_: object) -> object:
        return megabyte_mapped_alone()


@glibc_only
def test_every_host_is_forked_tuned(node: Node) -> None:
    probe = node.spawn(HeapProbe, host="own")
    assert probe.call("mapped alone?", timeout=10.0) is False
