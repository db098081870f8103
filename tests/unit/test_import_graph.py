"""vllm_tasks/ has no import cycle (issue 22, item 4): the graph of module-level imports is acyclic.

Every module is parsed (never imported); an edge ``a -> b`` is an import that runs when ``a`` is imported:
in the module's body, its class bodies, ``try``/``with`` blocks and ``if`` branches, but not inside a
function nor under ``if TYPE_CHECKING:`` (annotations only). ``from . import x`` points at the submodule
``x`` when there is one, else at the package whose ``__init__`` defines ``x``. Importing a module also
runs its packages' ``__init__`` files, but those are already running when a submodule imports its
siblings, so that implicit edge is left out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "vllm_tasks"

Edge = tuple[str, str, int]
"""(importing module, imported module, line of the import)."""


def module_names() -> dict[str, Path]:
    """``vllm_tasks.types.audio`` -> its file (a package is named by its ``__init__.py``)."""
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def run_at_import(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of ``body`` that run when the module is imported."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not is_type_checking(node.test):
                yield from run_at_import(node.body)
            yield from run_at_import(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from run_at_import(block)
        elif isinstance(node, ast.With | ast.ClassDef):
            yield from run_at_import(node.body)


def targets(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool, known: set[str]) -> set[str]:
    """The package modules one import statement loads (relative imports resolved)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in known}
    if node.level:
        package = importer if is_package else importer.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    found = {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known}
    if base in known and (node.module or len(found) < len(node.names)):
        found.add(base)  # names defined by the module (or package __init__) itself
    return found


def import_edges() -> list[Edge]:
    """Every module-level import between two modules of the package."""
    names = module_names()
    known = set(names)
    edges = []
    for name, path in names.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in run_at_import(tree.body):
            for target in sorted(targets(node, name, path.name == "__init__.py", known)):
                if target != name:
                    edges.append((name, target, node.lineno))
    return edges


def cycles(edges: list[Edge]) -> list[list[Edge]]:
    """One cycle (as its edges) per strongly connected component that has one (Tarjan's algorithm)."""
    graph: dict[str, list[Edge]] = {}
    for edge in edges:
        graph.setdefault(edge[0], []).append(edge)
        graph.setdefault(edge[1], [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for _, target, _ in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: set[str] = set()
            while node not in component:
                component.add(stack.pop())
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [shortest_cycle(graph, component) for component in components]


def shortest_cycle(graph: dict[str, list[Edge]], component: set[str]) -> list[Edge]:
    """A shortest cycle through the component's first module (breadth first, inside the component)."""
    start = min(component)
    paths: dict[str, list[Edge]] = {start: []}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for edge in graph[node]:
                if edge[1] == start:
                    return [*paths[node], edge]
                if edge[1] in component and edge[1] not in paths:
                    paths[edge[1]] = [*paths[node], edge]
                    following.append(edge[1])
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a strongly connected component has one


def describe(cycle: list[Edge]) -> str:
    """``a (a.py:12) -> b (b.py:3) -> a``."""
    steps = [f"{source} (line {line})" for source, _, line in cycle]
    return " -> ".join([*steps, cycle[0][0]])


def test_the_graph_sees_the_imports() -> None:
    """The graph is built from real imports: the client's modules import the pure ones."""
    edges = {(source, target) for source, target, _ in import_edges()}
    assert ("vllm_tasks._async.client", "vllm_tasks._async.base") in edges
    assert ("vllm_tasks._async.audio", "vllm_tasks.transcription") in edges
    assert len(edges) > 100


def test_finding_a_cycle() -> None:
    edges = [("a", "b", 1), ("b", "c", 2), ("c", "a", 3), ("c", "d", 4)]
    assert [describe(cycle) for cycle in cycles(edges)] == ["a (line 1) -> b (line 2) -> c (line 3) -> a"]
    assert cycles([("a", "b", 1), ("b", "c", 2)]) == []


def test_there_is_no_import_cycle() -> None:
    found = cycles(import_edges())
    assert not found, "import cycles in vllm_tasks/ (module, line of its import):\n" + "\n".join(
        describe(cycle) for cycle in found
    )
