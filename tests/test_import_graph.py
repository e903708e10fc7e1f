"""The import graph of our packages, read with ``ast`` (nothing runs).

Every import statement counts, at module level or inside a function (a lazy
import is still a dependency, and so is one under ``if TYPE_CHECKING``), and so
does ``importlib.import_module`` with a literal name. The checks: nothing imports
``harness.cli`` but the entry point itself; no cycle between modules; no cycle
between the layers' packages; each layer imports only the layers below it
(``envs`` < ``evaluation`` < ``algorithms`` < ``harness``); the run-directory
format (``harness.rundir``) and the command helpers (``harness.commands``) are
leaves that import nothing of ours.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The layers, lowest first: a module may import its own layer and those before it.
LAYER_PACKAGES = ("envs", "evaluation", "algorithms", "harness")
PACKAGES = LAYER_PACKAGES


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``line`` of ``path``."""

    source: str
    target: str
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.path.relative_to(ROOT)}:{self.line})"


def find_modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package ``__init__``), for every package of ours."""
    found: dict[str, tuple[Path, bool]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            found[".".join(parts)] = (path, is_package)
    return found


MODULES = find_modules()


def _known(name: str) -> str | None:
    """The module ``name`` loads: itself or, for a name inside a module, its longest prefix."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imported_names(node: ast.AST, package: str) -> Iterator[str]:
    """Dotted names an AST node imports (``package``: where relative imports start)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        for alias in node.names:
            submodule = f"{module}.{alias.name}"
            yield submodule if submodule in MODULES else module
    elif isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if (
            name in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value


def find_edges() -> list[Edge]:
    """Every import of one of our modules by another, once per (source, target)."""
    edges: dict[tuple[str, str], Edge] = {}
    for name, (path, is_package) in MODULES.items():
        package = name if is_package else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            for imported in _imported_names(node, package):
                target = _known(imported)
                if target is None or target == name:
                    continue
                key = (name, target)
                line = getattr(node, "lineno", 0)
                if key not in edges or line < edges[key].line:
                    edges[key] = Edge(name, target, path, line)
    return sorted(edges.values(), key=lambda e: (e.source, e.line))


EDGES = find_edges()


def strongly_connected(nodes: list[str], edges: list[tuple[str, str]]) -> list[frozenset[str]]:
    """Tarjan's components with more than one node (a self-import is not counted)."""
    out: dict[str, list[str]] = {node: [] for node in nodes}
    for source, target in edges:
        out[source].append(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[frozenset[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            if child < len(out[node]):
                work.append((node, child + 1))
                nxt = out[node][child]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(frozenset(component))
    return components


def a_cycle(component: frozenset[str], edges: list[tuple[str, str]]) -> list[str]:
    """One cycle through a component, as a closed path (first node repeated at the end)."""
    start = min(component)
    out: dict[str, list[str]] = {}
    for source, target in edges:
        if source in component and target in component:
            out.setdefault(source, []).append(target)
    paths = {start: [start]}
    frontier = [start]
    while frontier:  # breadth first: the shortest way back to the start
        later = []
        for node in frontier:
            for nxt in sorted(out.get(node, [])):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    later.append(nxt)
        frontier = later
    return sorted(component)


def describe_cycle(component: frozenset[str], edges: list[Edge]) -> str:
    """A cycle of modules with the import line of each step."""
    pairs = [(e.source, e.target) for e in edges]
    path = a_cycle(component, pairs)
    by_pair = {(e.source, e.target): e for e in edges}
    steps = [str(by_pair[pair]) for pair in itertools.pairwise(path) if pair in by_pair]
    return " | ".join(steps) or ", ".join(sorted(component))


def layer_of(module: str) -> str:
    return next(p for p in LAYER_PACKAGES if module == p or module.startswith(p + "."))


# -- the checks --------------------------------------------------------------------------


def test_the_graph_is_read() -> None:
    """The reader sees the imports it should (else every check below passes vacuously)."""
    pairs = {(e.source, e.target) for e in EDGES}
    assert ("harness.runner", "algorithms.registry") in pairs
    assert ("harness.sweep.store", "harness.rundir") in pairs
    assert ("envs", "envs.registry") in pairs  # from a package's __init__
    assert ("algorithms.es_engine", "evaluation.backends") in pairs
    assert ("evaluation.registry", "evaluation.backends") in pairs  # under TYPE_CHECKING
    assert len(MODULES) > 50 and len(EDGES) > 100


def test_nothing_imports_the_command_line() -> None:
    """Sub-commands and helpers sit below ``harness.cli``; only the entry point is it."""
    offenders = [str(e) for e in EDGES if e.target == "harness.cli"]
    assert not offenders, "imports of harness.cli (move what they need to harness.commands): " + (
        "; ".join(offenders)
    )


def test_no_import_cycle_between_modules() -> None:
    nodes = sorted(MODULES)
    components = strongly_connected(nodes, [(e.source, e.target) for e in EDGES])
    assert not components, "import cycles: " + " || ".join(
        describe_cycle(c, EDGES) for c in components
    )


def test_no_import_cycle_between_packages() -> None:
    pairs = sorted(
        {
            (layer_of(e.source), layer_of(e.target))
            for e in EDGES
            if layer_of(e.source) != layer_of(e.target)
        }
    )
    components = strongly_connected(list(LAYER_PACKAGES), pairs)
    witnesses: dict[tuple[str, str], str] = {}  # one import per pair of packages
    for e in EDGES:
        pair = (layer_of(e.source), layer_of(e.target))
        if pair[0] != pair[1] and any(set(pair) <= c for c in components):
            witnesses.setdefault(pair, str(e))
    assert not components, f"package cycles {[sorted(c) for c in components]}: " + "; ".join(
        witnesses.values()
    )


def upward_imports(edges: list[Edge]) -> list[Edge]:
    """Imports of a higher layer by a lower one (:data:`LAYER_PACKAGES` order)."""
    rank = {package: i for i, package in enumerate(LAYER_PACKAGES)}
    return [e for e in edges if rank[layer_of(e.target)] > rank[layer_of(e.source)]]


@pytest.mark.parametrize("layer", LAYER_PACKAGES[:-1])
def test_layers_import_only_below_them(layer: str) -> None:
    """``envs`` imports none of the others, ``evaluation`` only ``envs``, ``algorithms`` no
    ``harness``: the runner hands an algorithm its evaluator, nothing reaches up for one."""
    above = LAYER_PACKAGES[LAYER_PACKAGES.index(layer) + 1 :]
    offenders = [str(e) for e in upward_imports(EDGES) if layer_of(e.source) == layer]
    assert not offenders, f"{layer} must not import {', '.join(above)}: " + "; ".join(offenders)


@pytest.mark.parametrize("leaf", ["harness.rundir", "harness.commands"])
def test_leaves_import_nothing_of_ours(leaf: str) -> None:
    """The run-directory format and the command helpers are usable from any layer."""
    assert leaf in MODULES
    offenders = [str(e) for e in EDGES if e.source == leaf]
    assert not offenders, f"{leaf} must import nothing of ours: " + ("; ".join(offenders))


def test_the_checks_can_fail() -> None:
    """A made-up cycle is found and described, and a real-looking one is not allowed."""
    edges = [
        Edge("a", "b", ROOT / "a.py", 3),
        Edge("b", "c", ROOT / "b.py", 4),
        Edge("c", "a", ROOT / "c.py", 5),
        Edge("c", "d", ROOT / "c.py", 6),
    ]
    components = strongly_connected(["a", "b", "c", "d"], [(e.source, e.target) for e in edges])
    assert components == [frozenset({"a", "b", "c"})]
    text = describe_cycle(components[0], edges)
    assert text == "a -> b (a.py:3) | b -> c (b.py:4) | c -> a (c.py:5)"
    up = Edge("evaluation.backends", "algorithms.base", ROOT / "evaluation/backends.py", 7)
    down = Edge("algorithms.base", "evaluation.noise", ROOT / "algorithms/base.py", 9)
    assert upward_imports([up, down]) == [up]
