"""The layers of the code, read from the imports of every module.

Every module of ``actors/`` and ``supervision/`` (and the programs in
``examples/``) is parsed, not imported, and every import it makes is
collected: top-level ones, local ones inside functions, those under
``if TYPE_CHECKING:``, and the module names given as strings to
``importlib.import_module``, ``__import__`` and ``importlib.resources.files``
(a dynamic import the checker cannot read is itself a violation).  Each
module is placed in a layer, and each layer may import only the layers
below it:

    tools -> app -> services -> supervision -> the kernel's public face
                                                       -> the kernel's private modules

- the kernel's own modules (``actors/_core``) import nothing of the public
  face, supervision, the services, the application or the tools; inside it,
  each floor imports only itself and the floors below it (`CORE_FLOORS`:
  wire/base -> transport/net -> runtime -> cell -> host -> node);
- the public face (``actors`` and its public modules) re-exports the kernel,
  or is written on it (`actors.api`, `actors.pg`, `actors.global_names`);
- ``supervision`` imports only the kernel's public face, never ``actors._core``;
- a service imports itself, ``supervision`` and the kernel's public face:
  never another service, never ``actors._core``, never the app or the tools;
- the application (``actors.app``: the CouchDB tree, the demos, chaos, the
  workload, the config check, the node command) imports services,
  ``supervision`` and the public face; the tools (``actors.tools``: command
  line, attach, status tree, bench runner, observer) also import the
  application;
- nothing outside ``actors/`` imports ``actors._core`` (tests and bench may);
- ``actors/__main__.py`` is the one module allowed to reach up (to the
  command line).

The layout is data (`Layout`, `CORE_FLOORS`).  What does not hold yet is
listed in `ALLOWED`, each with its reason; an entry no longer needed fails
the test too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

KERNEL = "kernel"  # the kernel's public face: what every layer above may import
PRIVATE = "kernel.private"  # the kernel's own modules: only the kernel imports them
SUPERVISION = "supervision"
SERVICE = "service"  # one layer per service: a service may import only itself
APP = "app"
TOOLS = "tools"
ENTRY = "entry"  # ``python -m actors``: may import anything
OUTSIDE = "outside"  # examples: user programs, public API only

#: Which layers each layer may import (its own included; ``SERVICE`` means any service).
MAY_IMPORT: dict[str, frozenset[str]] = {
    PRIVATE: frozenset({PRIVATE}),  # the kernel stands on nothing of its public face
    KERNEL: frozenset({PRIVATE, KERNEL}),
    SUPERVISION: frozenset({SUPERVISION, KERNEL}),
    SERVICE: frozenset({SUPERVISION, KERNEL}),  # and itself, never another service
    APP: frozenset({APP, SERVICE, SUPERVISION, KERNEL}),
    TOOLS: frozenset({TOOLS, APP, SERVICE, SUPERVISION, KERNEL}),
    OUTSIDE: frozenset({TOOLS, APP, SERVICE, SUPERVISION, KERNEL}),
}


@dataclass(frozen=True)
class Layout:
    """Where each module belongs, by module name (a name or a package prefix)."""

    packages: tuple[str, ...]  # folders under the root whose modules are checked
    kernel_public: frozenset[str]  # modules of the kernel's public face
    kernel_private: tuple[str, ...]  # prefixes: a module whose name starts so is the kernel's own
    services: tuple[str, ...]
    app: tuple[str, ...]
    tools: tuple[str, ...]
    entry: frozenset[str]
    supervision: tuple[str, ...] = ("supervision",)
    outside: tuple[str, ...] = ("examples",)

    def layer(self, module: str) -> tuple[str, str] | None:
        """``(layer, unit)``: the unit is the service's package for a service, else the layer."""
        if module in self.entry:
            return ENTRY, ENTRY
        if module in self.kernel_public:
            return KERNEL, KERNEL
        if any(module.startswith(p) for p in self.kernel_private):
            return PRIVATE, PRIVATE
        for service in self.services:
            if _within(module, service):
                return SERVICE, service
        for name, prefixes in (
            (SUPERVISION, self.supervision),
            (APP, self.app),
            (TOOLS, self.tools),
            (OUTSIDE, self.outside),
        ):
            if any(_within(module, p) for p in prefixes):
                return name, name
        return None


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


#: The layout.  The kernel's public face is ``actors`` and the modules
#: programs import by name; each of them re-exports the kernel's own module
#: (``actors/_core``), except `actors.api`, `actors.plain`, `actors.pg` and
#: `actors.global_names`, written on top of it as OTP's ``pg`` and ``global``
#: are on top of ``erts``, `actors.tree`, which renders `Node.actors()`, and
#: `actors.leases`, the leases the services that need "at most one" share.
TODAY = Layout(
    packages=("actors", "supervision", "examples"),
    kernel_public=frozenset(
        {
            "actors",
            "actors.node",
            "actors.gen_server",
            "actors.gen_statem",
            "actors.sys",
            "actors.api",
            "actors.config",
            "actors.stats",
            "actors.clock",
            "actors.plain",
            "actors.interrupt",
            "actors.cluster_settings",
            "actors.pg",
            "actors.global_names",
            "actors.metrics",
            "actors.attach",
            "actors.cluster_key",
            "actors.tree",
            "actors.leases",
            "actors.leases.errors",
            "actors.leases.policy",
            "actors.leases.sql",
            "actors.leases.pg",
            "actors.leases.holder",
        }
    ),
    kernel_private=("actors._core",),
    services=("actors.ioq", "actors.smoosh", "actors.replicator", "actors.couch_jobs", "actors.sharding"),
    app=("actors.app",),
    tools=("actors.tools",),
    entry=frozenset({"actors.__main__"}),
)

#: The kernel's own floors, bottom-up: a module of ``actors._core.<floor>``
#: imports only its own floor and those below it.  ``base`` (configuration,
#: stats, clocks), ``wire`` (refs, reasons, the codec), ``cluster`` (pure policy
#: of pg and global names) and ``metrics`` stand on nothing of the kernel.
CORE_FLOORS: dict[str, int] = {
    "base": 0,
    "wire": 0,
    "cluster": 0,
    "metrics": 0,
    "transport": 1,
    "net": 1,
    "runtime": 2,
    "cell": 3,
    "host": 4,
    "node": 5,
}


def core_floor(module: str) -> tuple[str, int] | None:
    """``(floor, height)`` of a module inside ``actors._core``, else None."""
    parts = module.split(".")
    if parts[:2] != ["actors", "_core"] or len(parts) < 3:
        return None
    height = CORE_FLOORS.get(parts[2])
    return None if height is None else (parts[2], height)


#: Imports that break the rule today, each with why it stays for now.
#: ``(importer, imported)``, both module names as `imports_of` reports them.
ALLOWED: dict[tuple[str, str], str] = {
    # The runtime names the cells it holds by their class, for the type checker only.
    ("actors._core.runtime.base", "actors._core.cell.cell"): "type hints of the cells the runtime holds",
    ("actors._core.runtime.context", "actors._core.cell.cell"): "type hints of the cell a thread runs",
    # PEP 562: each public name is imported on first use from the module its
    # table names; the same imports stand under TYPE_CHECKING, where they are checked.
    ("actors", "<dynamic>"): "public names imported on first use (the same imports are read under TYPE_CHECKING)",
    # The entity classes a node's ``[sharding] types`` names (module:Class): the user's code, in no layer.
    ("actors.sharding.configured", "<dynamic>"): "entity classes named in the node's config",
}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    how: str  # "import", "from", "TYPE_CHECKING", "local", "dynamic"

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} imports {self.imported} ({self.how})"


@dataclass
class Modules:
    """The modules under ``root`` in ``packages``: name -> path."""

    root: Path
    packages: Iterable[str]
    paths: dict[str, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for package in self.packages:
            base = self.root / package
            if not base.is_dir():
                continue
            for path in sorted(base.rglob("*.py")):
                parts = list(path.relative_to(self.root).with_suffix("").parts)
                if parts[-1] == "__init__":
                    parts.pop()
                self.paths[".".join(parts)] = path


def _dynamic_name(call: ast.Call) -> tuple[bool, str | None]:
    """(is a dynamic import, the module named when it is a constant)."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in ("import_module", "__import__", "files"):
        return False, None
    if name == "files" and not (
        isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute) and func.value.attr == "resources"
    ):
        return False, None  # only importlib.resources.files imports its package
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return True, call.args[0].value
    return True, None


def _type_checking_lines(tree: ast.Module) -> set[int]:
    """Lines inside ``if TYPE_CHECKING:`` blocks."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.attr if isinstance(test, ast.Attribute) else test.id if isinstance(test, ast.Name) else ""
            if name == "TYPE_CHECKING":
                for stmt in node.body:
                    lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return lines


def _local_lines(tree: ast.Module) -> set[int]:
    """Lines inside function bodies (imports there run late: local imports)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for stmt in node.body:
                lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return lines


def imports_of(modules: Modules, module: str) -> list[Import]:
    """Every import ``module`` makes of a module under the checked packages.

    ``from package import name`` counts as an import of ``package.name`` when
    that is a module, else of ``package``.  A dynamic import whose module is
    not a constant string is reported as importing ``"<dynamic>"``.  One
    entry per (module imported, line)."""
    return list({(i.imported, i.line): i for i in _imports(modules, module)}.values())


def _imports(modules: Modules, module: str) -> Iterator[Import]:
    path = modules.paths[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    guarded = _type_checking_lines(tree)
    local = _local_lines(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def how(node: ast.AST, default: str) -> str:
        line = getattr(node, "lineno", 0)
        return "TYPE_CHECKING" if line in guarded else "local" if line in local else default

    def ours(name: str) -> bool:
        return any(_within(name, p) for p in modules.packages)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if ours(alias.name):
                    yield Import(module, alias.name, node.lineno, how(node, "import"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not ours(target):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield Import(module, sub if sub in modules.paths else target, node.lineno, how(node, "from"))
        elif isinstance(node, ast.Call):
            dynamic, name = _dynamic_name(node)
            if not dynamic:
                continue
            if name is None:
                yield Import(module, "<dynamic>", node.lineno, "dynamic")
            elif ours(name):
                yield Import(module, name, node.lineno, "dynamic")


def violations(
    root: Path,
    layout: Layout,
    allowed: dict[tuple[str, str], str] | None = None,
    used: set[tuple[str, str]] | None = None,
) -> list[str]:
    """What breaks the layering under ``root``; ``used`` collects the allow-list entries that were needed."""
    allowed = allowed or {}
    modules = Modules(root, layout.packages)
    out: list[str] = []
    for module in sorted(modules.paths):
        placed = layout.layer(module)
        if placed is None:
            out.append(f"{module} is in no layer: place it in the layout of tests/test_layers.py")
            continue
        layer, unit = placed
        if layer == ENTRY:
            continue
        for imp in imports_of(modules, module):
            if imp.imported == "<dynamic>":
                if (imp.importer, imp.imported) in allowed:
                    if used is not None:
                        used.add((imp.importer, imp.imported))
                    continue
                out.append(f"{imp}: a dynamic import the checker cannot read")
                continue
            target = layout.layer(imp.imported)
            if target is None:
                out.append(f"{imp}: {imp.imported} is in no layer")
                continue
            to_layer, to_unit = target
            if to_layer == SERVICE and layer == SERVICE:
                ok = to_unit == unit
            elif to_layer == PRIVATE and layer == PRIVATE:
                ok = _floor_ok(module, imp.imported)
            else:
                ok = to_layer in MAY_IMPORT[layer]
            if ok:
                continue
            key = (imp.importer, imp.imported)
            if key in allowed:
                if used is not None:
                    used.add(key)
                continue
            if layer == PRIVATE and to_layer == PRIVATE:
                out.append(f"{imp}: the kernel's floor {core_floor(module)} may not import {core_floor(imp.imported)}")
            else:
                out.append(f"{imp}: {layer} ({unit}) may not import {to_layer} ({to_unit})")
    return out


def _floor_ok(importer: str, imported: str) -> bool:
    """Inside the kernel: a floor imports itself and the floors below it."""
    here, there = core_floor(importer), core_floor(imported)
    if here is None or there is None:
        return here is None  # the package's own __init__ may import any floor; a floor not listed may not
    return there[1] <= here[1]


# -- the repository ----------------------------------------------------------------


def test_the_layers_hold() -> None:
    used: set[tuple[str, str]] = set()
    found = violations(ROOT, TODAY, ALLOWED, used)
    assert not found, "imports that break the layering:\n" + "\n".join(found)
    stale = sorted(set(ALLOWED) - used)
    assert not stale, f"allowed exceptions no longer needed (remove them from ALLOWED): {stale}"


def test_every_module_is_read() -> None:
    """The checker sees the whole tree: the kernel, each service, the app, the tools."""
    modules = Modules(ROOT, TODAY.packages)
    layers = {TODAY.layer(m) for m in modules.paths}
    for unit in ("actors.ioq", "actors.smoosh", "actors.replicator", "actors.couch_jobs"):
        assert (SERVICE, unit) in layers
    for layer in (KERNEL, PRIVATE, SUPERVISION, APP, TOOLS, ENTRY, OUTSIDE):
        assert (layer, layer) in layers
    assert len(modules.paths) > 150


# -- the checker, on small trees made for it -----------------------------------------


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in {
        "actors/__init__.py": "from actors.node import Node\n",
        "actors/node.py": "from actors._core.node.node import Node\n",
        "actors/_core/__init__.py": "",
        "actors/_core/runtime/runtime.py": "import threading\n",
        "actors/_core/cell/cell.py": "from actors._core.runtime import runtime\n",
        "actors/_core/node/node.py": "from actors._core.cell import cell\n",
        "actors/ioq/__init__.py": "from actors import Node\nimport supervision\n",
        "actors/smoosh/__init__.py": "from actors.api import whereis\n",
        "actors/api.py": "from actors._core.runtime.runtime import threading\n",
        "actors/tools/cli.py": "import actors.ioq\nimport actors.app.demo\n",
        "actors/app/demo.py": "import actors.smoosh\n",
        "actors/__main__.py": "from actors.tools.cli import main\n",
        "supervision/__init__.py": "from actors import Node\n",
        **files,
    }.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    assert violations(_tree(tmp_path, {}), TODAY) == []


def test_a_backwards_import_fails_in_every_form(tmp_path: Path) -> None:
    """The kernel reaching up, written each way an import can hide."""
    forms = {
        "import": "import actors.ioq\n",
        "from": "from actors.smoosh import whereis\n",
        "relative": "from ...ioq import Node\n",
        "local": "def f():\n    from actors.tools import cli\n    return cli\n",
        "TYPE_CHECKING": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import supervision\n",
        "importlib": "import importlib\nM = importlib.import_module('actors.app.demo')\n",
        "__import__": "M = __import__('actors.tools.cli')\n",
        "unreadable": "import importlib\nNAME = 'actors.' + 'cli'\nM = importlib.import_module(NAME)\n",
        "the public face": "import actors.config\n",
    }
    for how, text in forms.items():
        root = _tree(tmp_path / how, {"actors/_core/node/node.py": "from actors._core.cell import cell\n" + text})
        found = violations(root, TODAY)
        assert len(found) == 1 and found[0].startswith("actors._core.node.node:"), (how, found)


def test_a_floor_of_the_kernel_may_not_import_one_above_it(tmp_path: Path) -> None:
    for importer, imported in (
        ("runtime/runtime", "cell.cell"),
        ("wire/ref", "runtime.runtime"),
        ("cell/cell", "host.host"),
        ("transport/transport", "node.node"),
    ):
        root = _tree(
            tmp_path / importer.replace("/", "_"),
            {
                f"actors/_core/{importer}.py": f"from actors._core.{imported} import x\n",
                f"actors/_core/{imported.replace('.', '/')}.py": "",
            },
        )
        found = violations(root, TODAY)
        assert len(found) == 1 and "may not import" in found[0], (importer, found)
    root = _tree(
        tmp_path / "down",
        {"actors/_core/host/host.py": "from actors._core.wire import ref\n", "actors/_core/wire/ref.py": ""},
    )
    assert violations(root, TODAY) == []


def test_each_rule_fails_on_its_own_breach(tmp_path: Path) -> None:
    breaches = {
        "supervision -> private kernel": (
            "supervision/__init__.py",
            "from actors._core.runtime.runtime import threading\n",
        ),
        "supervision -> service": ("supervision/__init__.py", "import actors.ioq\n"),
        "service -> service": ("actors/ioq/__init__.py", "from actors.smoosh import whereis\n"),
        "service -> private kernel": ("actors/ioq/__init__.py", "from actors._core.runtime.runtime import threading\n"),
        "service -> app": ("actors/ioq/__init__.py", "import actors.app.demo\n"),
        "app -> tools": ("actors/app/demo.py", "import actors.tools.cli\n"),
        "app -> private kernel": ("actors/app/demo.py", "import actors._core.runtime.runtime\n"),
        "example -> private kernel": ("examples/prog.py", "import actors._core.runtime.runtime\n"),
        "a module in no layer": ("actors/newthing.py", "import actors\n"),
    }
    for what, (name, text) in breaches.items():
        root = _tree(tmp_path / what.replace(" ", "_").replace(">", ""), {name: text})
        assert len(violations(root, TODAY)) == 1, what


def test_the_entry_point_may_reach_up_and_an_allowed_import_is_counted(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "actors/__main__.py": "import actors.tools.cli\nimport actors._core.runtime.runtime\n",
            "actors/app/demo.py": "import actors.smoosh\nimport actors.tools.cli\n",
        },
    )
    used: set[tuple[str, str]] = set()
    reason = {("actors.app.demo", "actors.tools.cli"): "for the test"}
    assert violations(root, TODAY, reason, used) == []
    assert used == {("actors.app.demo", "actors.tools.cli")}
