"""The packages are layered (data -> index + llm -> methods -> scheduler/runner -> cli): no module imports one
that imports it back, directly or through others.

The rule: an edge A -> B for every ``import`` of B in A's source, at module level *and* inside functions. A lazy
import inside a function is an arrow all the same (it is often there only to hide a circle that module-level imports
would make fail at start-up), so it counts. Imports under ``if TYPE_CHECKING:`` do not run and are left out, as is
the implicit import of a package's ``__init__`` when one of its submodules is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def modules(package: str, root: Path) -> dict[str, Path]:
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking_only(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING" or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def imported_names(tree: ast.AST):
    """Every module name an import statement in ``tree`` names (``from a.b import c`` names ``a.b.c`` and ``a.b``)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if _type_checking_only(node):
            continue
        if isinstance(node, ast.Import):
            yield from ([alias.name] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield from ([f"{node.module}.{alias.name}", node.module] for alias in node.names)
        stack.extend(ast.iter_child_nodes(node))


def import_graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    known = modules(package, root)

    def resolve(candidates: list[str]) -> str | None:
        for name in candidates:  # the most specific name that is one of our modules
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                return name
        return None

    graph = {}
    for name, path in known.items():
        targets = {resolve(candidates) for candidates in imported_names(ast.parse(path.read_text(), str(path)))}
        graph[name] = {target for target in targets if target and target != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_circle_through_a_lazy_import(tmp_path):
    """The check itself can fail: a function-level import that closes a circle is found."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from pkg.high import g\n    return g\n")
    (package / "high.py").write_text("from pkg import low\n")
    (package / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high import g\n")
    assert cycles(import_graph("pkg", tmp_path)) == [["pkg.high", "pkg.low"]]


@pytest.mark.parametrize("package", ["garen_infer", "garen_train"])
def test_no_module_imports_one_that_imports_it_back(package):
    found = cycles(import_graph(package))
    assert not found, "import circles (every arrow should point down the layers): " + "; ".join(" <-> ".join(c) for c in found)
