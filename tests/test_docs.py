"""Every Python code block in README.md and docs/*.md runs as written.

Convention (the info string after the opening fence; GitHub highlights by
its first word and ignores the rest):

- ```` ```python ```` -- a complete program: run on its own.
- ```` ```python continued ```` -- the next part of the program above it in the
  same file: run appended to the blocks before it (back to the last complete
  one), so a page can explain a program piece by piece.
- ```` ```python no-run: <reason> ```` -- shown, not run; the reason is
  required (e.g. "needs a CouchDB server at :5984", "an API signature").

Each program runs in a fresh temporary folder, in its own interpreter, with
this checkout first on ``sys.path``; it must exit with status 0 within the
time limit.  New pages under docs/ are covered without any change here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
RUN_TIMEOUT = 50


@dataclass
class Block:
    path: Path
    line: int
    info: str
    code: str

    @property
    def kind(self) -> str:
        words = self.info.split()
        if not words or words[0] != "python":
            return "other"
        if len(words) > 1 and words[1].rstrip(":") == "no-run":
            return "no-run"
        if len(words) > 1 and words[1] == "continued":
            return "continued"
        return "program"

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Fenced code blocks of a Markdown file, with the line of their opening fence."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start, body = m.group("fence"), i + 1, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1
        out.append(Block(path, start, m.group("info").strip(), "\n".join(body) + "\n"))
    return out


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def programs() -> list[tuple[str, list[Block]]]:
    """(id, blocks) for each runnable program: a complete block and its continuations."""
    result: list[tuple[str, list[Block]]] = []
    for path in doc_files():
        current: list[Block] | None = None
        for block in blocks(path):
            if block.kind == "program":
                current = [block]
                result.append((block.where, current))
            elif block.kind == "continued":
                if current is None:
                    raise AssertionError(f"{block.where}: 'python continued' with no complete block before it")
                current.append(block)
    return result


def test_the_convention_is_followed():
    """Every Python block is a program, a continuation of one, or says why it does not run."""
    python = [b for p in doc_files() for b in blocks(p) if b.info.split()[:1] in (["python"], ["py"])]
    assert python, "no Python blocks found: is the fence pattern right?"
    for block in python:
        assert block.info.split()[0] == "python", f"{block.where}: use ```python"
        if block.kind == "no-run":
            reason = block.info.split(None, 2)[2:] if len(block.info.split()) > 2 else []
            assert reason and reason[0].strip(), f"{block.where}: 'no-run' needs a reason"
    programs()  # raises on a continuation without a program before it


def test_readme_lists_the_guides():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for guide in ("docs/getting_started.md", "docs/operations.md"):
        assert f"]({guide})" in readme, guide


@pytest.mark.timeout(RUN_TIMEOUT + 10)
@pytest.mark.parametrize("where,parts", programs(), ids=[p[0] for p in programs()])
def test_python_block_runs(where: str, parts: list[Block], tmp_path: Path) -> None:
    source = "".join(f"# --- {b.where}\n{b.code}" for b in parts)
    script = tmp_path / "block.py"
    script.write_text(source, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        proc = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"{where}: still running after {RUN_TIMEOUT} s (a program that does not end)\n"
            f"{exc.stdout or ''}{exc.stderr or ''}"
        ) from None
    assert proc.returncode == 0, f"{where}: exit {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"


@pytest.mark.timeout(RUN_TIMEOUT + 10)
@pytest.mark.parametrize(
    "argv,status,expect",
    [
        (["examples/supervision_tree.py"], 0, ""),
        (["examples/embed_node.py"], 0, "couch_sup"),
        (["examples/embed_node.py", "nosuch.ini"], 2, "config file not found: nosuch.ini"),
    ],
)
def test_examples_run_and_end(argv: list[str], status: int, expect: str) -> None:
    proc = subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == status, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert expect in proc.stdout + proc.stderr
    if status:
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
