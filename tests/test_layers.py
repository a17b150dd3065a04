"""Imports run one way: faces → node → services → log → store / network → domain.

The check reads the package's own source (every ``import`` statement, those under
``if TYPE_CHECKING:`` and inside functions included) and fails on any module import that runs
up the layers, and on any cycle: between modules, and between the folders (packages) that hold
them. Each failure names the offending arrows or cycles, with the file and line of each import.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import bzzz

# Top to bottom. A module belongs to the layer of its first name under ``bzzz`` (its folder
# or its own name).
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("faces", frozenset({"cli", "api", "mcp", "ui", "light", "entry"})),
    ("node", frozenset({"node"})),
    (
        "services",
        frozenset(
            {
                "a2a",
                "access",
                "agents",
                "audit",
                "conversations",
                "events",
                "federation",
                "knowledge",
                "llm",
                "metrics",
                "peers",
                "privacy",
                "reservations",
                "retention",
                "snapshots",
                "whoosh",
            }
        ),
    ),
    ("log", frozenset({"eventlog", "projector"})),
    ("store and network", frozenset({"store", "network"})),
    (
        "domain",
        frozenset(
            {
                "",  # bzzz/__init__.py
                "address",
                "backoff",
                "clock",
                "config",
                "domain",
                "errors",
                "logsummary",
                "principal",
                "projects",
                "schemas",
            }
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class Arrow:
    """One import: ``source`` imports ``target`` at ``where`` (file:line).

    ``implicit``: the package whose ``__init__.py`` importing one of its modules runs.
    """

    source: str
    target: str
    where: str
    implicit: bool = False

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.where})"


def modules_of(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package under ``root`` (the package's folder), by dotted name."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(module: str, is_package: bool, node: ast.AST) -> Iterable[tuple[str, list[str]]]:
    """(module named, names taken from it) for one import statement."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, []
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".")
            if not is_package:
                base.pop()
            base = base[: len(base) - (node.level - 1)]
            name = ".".join([*base, *([node.module] if node.module else [])])
        else:
            name = node.module or ""
        yield name, [alias.name for alias in node.names]


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The deepest module of the package that ``name`` denotes (None: not the package's)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


@cache
def import_graph(root: Path, package: str) -> tuple[dict[str, Path], list[Arrow]]:
    """The package's modules and every import among them (one arrow per statement and target).

    ``from a.b import c`` points at ``a.b.c`` when that is a module, else at ``a.b``; importing
    ``a.b.c`` from outside ``a.b`` also runs ``a.b/__init__.py``, so it points at ``a.b`` too.
    """
    modules = modules_of(root, package)
    arrows: list[Arrow] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        where_base = path.relative_to(root.parent).as_posix()
        for node in ast.walk(tree):
            for name, names in _imported(module, is_package, node):
                targets = {_resolve(f"{name}.{n}", modules) for n in names} or {None}
                targets = {t if t is not None else _resolve(name, modules) for t in targets}
                for target in {t for t in targets if t is not None}:
                    where = f"{where_base}:{node.lineno}"
                    if target != module:
                        arrows.append(Arrow(module, target, where))
                    for parent in _parents(target, module, package):
                        arrows.append(Arrow(module, parent, where, implicit=True))
    return modules, arrows


def _parents(target: str, importer: str, package: str) -> list[str]:
    """The packages above ``target`` that importing it runs (not the importer's own)."""
    reached = []
    parent = target.rpartition(".")[0]
    while parent and parent != package:
        if not (importer == parent or importer.startswith(parent + ".")):
            reached.append(parent)
        parent = parent.rpartition(".")[0]
    return reached


def layer_of(module: str) -> int | None:
    """The index of the module's layer in LAYERS (0 is the top), None when it has none."""
    first = module.split(".")[1] if "." in module else ""
    for index, (_, names) in enumerate(LAYERS):
        if first in names:
            return index
    return None


def up_arrows(arrows: Iterable[Arrow]) -> list[Arrow]:
    """The imports whose target sits in a higher layer than their source."""
    found = []
    for arrow in arrows:
        if arrow.implicit:
            continue  # its package's own module is named by the explicit arrow beside it
        source, target = layer_of(arrow.source), layer_of(arrow.target)
        if source is not None and target is not None and target < source:
            found.append(arrow)
    return sorted(found, key=str)


def reachable(start: str, edges: dict[str, set[str]]) -> set[str]:
    """Every node a path from ``start`` reaches (``start`` only if it is on a cycle)."""
    seen: set[str] = set()
    todo = list(edges.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(edges.get(node, ()))
    return seen


def strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """The parts of the graph (more than one node) where every node reaches every other."""
    reach = {node: reachable(node, edges) for node in edges}
    parts: list[set[str]] = []
    placed: set[str] = set()
    for node in sorted(edges):
        if node in placed:
            continue
        part = {node} | {other for other in reach[node] if node in reach.get(other, ())}
        placed |= part
        if len(part) > 1:
            parts.append(part)
    return parts


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """A shortest cycle (``a, b, …, a``) through each node that sits on one, without repeats."""
    found: set[tuple[str, ...]] = set()
    for part in strongly_connected(edges):
        for start in part:
            cycle = _cycle_through(start, part, edges)
            # The same cycle met from another of its nodes: start it at its smallest.
            turn = cycle.index(min(cycle))
            found.add(tuple(cycle[turn:-1] + cycle[:turn] + [min(cycle)]))
    return sorted(list(c) for c in found)


def _cycle_through(start: str, part: set[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through ``start``, staying inside its strongly connected part."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges.get(node, set()) & part):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {sorted(part)}")


def module_edges(arrows: Iterable[Arrow]) -> dict[str, set[str]]:
    """Module → the modules it imports."""
    edges: dict[str, set[str]] = {}
    for arrow in arrows:
        edges.setdefault(arrow.source, set()).add(arrow.target)
    return edges


def folder_of(module: str) -> str:
    """The folder (first name under the package) a module lives in, or the module itself."""
    return ".".join(module.split(".")[:2])


def folder_edges(arrows: Iterable[Arrow]) -> dict[str, set[str]]:
    """Folder → the folders its modules import (``bzzz.store`` for every store module)."""
    edges: dict[str, set[str]] = {}
    for arrow in arrows:
        source, target = folder_of(arrow.source), folder_of(arrow.target)
        if source != target:
            edges.setdefault(source, set()).add(target)
    return edges


def _describe(cycle: list[str], arrows: list[Arrow], *, by_folder: bool = False) -> str:
    """A cycle with the import (file:line) behind each of its steps."""
    name = folder_of if by_folder else str
    steps = []
    for source, target in itertools.pairwise(cycle):
        found = [a for a in arrows if name(a.source) == source and name(a.target) == target]
        found.sort(key=lambda a: a.implicit)
        steps.append(str(found[0]) if found else f"{source} -> {target}")
    return " -> ".join(cycle) + "\n      " + "\n      ".join(steps)


ROOT = Path(bzzz.__file__).parent


def test_every_module_sits_in_a_layer() -> None:
    modules, _ = import_graph(ROOT, "bzzz")
    homeless = sorted(m for m in modules if layer_of(m) is None)
    assert not homeless, (
        "modules of no layer (add their folder to LAYERS in tests/test_layers.py): "
        + ", ".join(homeless)
    )


def test_no_import_runs_up_the_layers() -> None:
    _, arrows = import_graph(ROOT, "bzzz")
    up = up_arrows(arrows)
    names = [name for name, _ in LAYERS]
    assert not up, f"{len(up)} imports run up the layers ({' > '.join(names)}):\n  " + "\n  ".join(
        f"{a}  [{names[layer_of(a.source) or 0]} imports {names[layer_of(a.target) or 0]}]"
        for a in up
    )


def test_no_module_imports_itself_round_a_cycle() -> None:
    _, arrows = import_graph(ROOT, "bzzz")
    found = cycles(module_edges(arrows))
    assert not found, f"{len(found)} import cycles between modules:\n  " + "\n  ".join(
        _describe(c, arrows) for c in found
    )


def test_no_folder_imports_itself_round_a_cycle() -> None:
    _, arrows = import_graph(ROOT, "bzzz")
    found = cycles(folder_edges(arrows))
    assert not found, f"{len(found)} import cycles between folders:\n  " + "\n  ".join(
        _describe(c, arrows, by_folder=True) for c in found
    )


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "bzzz" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "bzzz"


def test_the_check_sees_type_only_and_function_imports_that_run_up(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "__init__.py": "",
            "node.py": "",
            "domain.py": "def f():\n    from bzzz import node\n",
            "store/__init__.py": "",
            "store/base.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..agents import x\n"
            ),
            "agents/__init__.py": "",
            "agents/x.py": "from bzzz.store import base\n",
        },
    )
    _, arrows = import_graph(root, "bzzz")
    assert [str(a) for a in up_arrows(arrows)] == [
        "bzzz.domain -> bzzz.node (bzzz/domain.py:2)",
        "bzzz.store.base -> bzzz.agents.x (bzzz/store/base.py:3)",
    ]
    assert cycles(module_edges(arrows)) == [["bzzz.agents.x", "bzzz.store.base", "bzzz.agents.x"]]
    assert cycles(folder_edges(arrows)) == [["bzzz.agents", "bzzz.store", "bzzz.agents"]]


def test_the_check_sees_a_cycle_within_one_layer(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "__init__.py": "",
            "llm/__init__.py": "",
            "llm/a.py": "from bzzz.llm.b import B\n",
            "llm/b.py": "import bzzz.llm.c\n",
            "llm/c.py": "from . import a\n",
        },
    )
    _, arrows = import_graph(root, "bzzz")
    assert up_arrows(arrows) == []
    assert cycles(module_edges(arrows)) == [
        ["bzzz.llm.a", "bzzz.llm.b", "bzzz.llm.c", "bzzz.llm.a"]
    ]
