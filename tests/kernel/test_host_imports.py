"""A fresh host carries the kernel and what its actors need, not the whole package.

Every host is forked from the zygote, and a host's size is paid on every
restart (the kernel unmaps it before it reports the death) and in every
host's memory.  So importing `actors` must not import the metrics server
(``prometheus_client``, ``http``), ``asyncio`` (``ssl``) or
``multiprocess``; those come on first use.  Each program runs in a fresh
interpreter, as a user's would, so what the test runner imported does not
reach the host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: ``mode`` "exec": a thread runs when the node starts, so the zygote is a fresh
#: interpreter; "fork": the program is single-threaded and the zygote a copy of it.
PROGRAM = """
import json, sys, threading
from actors import Node
from tests.kernel.import_probe import ModulesReport
if sys.argv[1] == "exec":
    threading.Thread(target=threading.Event().wait, daemon=True).start()
with Node() as node:
    ref = node.spawn(ModulesReport, host="own")
    print(json.dumps({"host": node.call(ref, "modules", timeout=30), "program": sorted(sys.modules)}))
"""

#: What an interpreter in this environment imports before running anything (site, .pth files).
BARE = "import sys; names = sorted(sys.modules); import json; print(json.dumps(names))"

#: Never in a host before an actor asks for them.
HEAVY = {"prometheus_client", "http.server", "wsgiref", "multiprocess", "multiprocessing"}
#: Modules of its own a fresh host may import beyond a bare interpreter's (about 145 today: the
#: kernel's ~55, pyzmq's ~20, cloudpickle, orjson and the stdlib they stand on; 310 before the
#: package was lazy).
MAX_OWN_MODULES = 175


def _run(code: str, *args: str) -> object:
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=100, cwd=ROOT, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize("mode", ["exec", "fork"])
def test_fresh_host_imports_the_kernel_only(mode: str) -> None:
    bare = set(_run(BARE))  # type: ignore[arg-type]
    seen = _run(PROGRAM, mode)
    assert isinstance(seen, dict)
    host = set(seen["host"])
    assert "actors._core.host.host" in host  # it is a host, reporting its own modules
    assert not HEAVY & host, sorted(HEAVY & host)
    assert not HEAVY & set(seen["program"]), "the node's program imported them, so every fork would carry them"
    # Neither the host nor the program (whose modules a forked zygote carries)
    # imported asyncio, ssl or http on the way to a node.
    assert not {"asyncio", "ssl", "http"} & host, sorted({"asyncio", "ssl", "http"} & host)
    if mode == "exec":
        own = host - bare
        assert len(own) < MAX_OWN_MODULES, sorted(own)
