"""The packages of garen_infer are layers: every import arrow between them points down the table ``LAYERS``
(storage at the bottom, the doors at the top), and no module imports one that imports it back.

The rule: an edge A -> B for every ``import`` of B in A's source, at module level, inside functions and under
``if TYPE_CHECKING:``. A lazy import inside a function is an arrow all the same (it is often there only to hide a
circle that module-level imports would make fail at start-up), and so is one made for typing alone: a reader meets
the loop either way. Left out is the implicit import of a package's ``__init__`` when one of its submodules is
imported. The layers are the table in ``garen_infer/__init__.py``'s docstring, read here, written nowhere else.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def modules(package: str, root: Path) -> dict[str, Path]:
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imported_names(tree: ast.AST):
    """Every module name an import statement in ``tree`` names (``from a.b import c`` names ``a.b.c`` and ``a.b``)."""
    stack = [tree]
    while stack:
        node = stack.pop()
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
    assert cycles(import_graph("pkg", tmp_path)) == [["pkg.high", "pkg.low"]]


def test_the_cycle_finder_counts_an_import_made_for_typing_only(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high import g\n")
    (package / "high.py").write_text("from pkg import low\n")
    assert cycles(import_graph("pkg", tmp_path)) == [["pkg.high", "pkg.low"]]


@pytest.mark.parametrize("package", ["garen_infer", "garen_train"])
def test_no_module_imports_one_that_imports_it_back(package):
    found = cycles(import_graph(package))
    assert not found, "import circles (every arrow should point down the layers): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def layers_of(package_init: Path) -> list[list[str]]:
    """The layer table of a package's docstring: after the line ending "Bottom to top:", one indented line per
    layer, ``unit, unit: what they hold``."""
    doc = ast.get_docstring(ast.parse(package_init.read_text()), clean=False) or ""
    table = doc.split("Bottom to top:\n", 1)[1].split("\n\n", 1)[0]
    return [[unit.strip() for unit in line.split(": ", 1)[0].split(",")] for line in table.strip("\n").splitlines()]


LAYERS = layers_of(ROOT / "garen_infer" / "__init__.py")


def unit_of(module_path: Path, package_root: Path) -> str:
    """The layer unit of a module file (see LAYERS)."""
    parts = module_path.relative_to(package_root).with_suffix("").parts
    if len(parts) == 1:
        return parts[0]
    if parts[0] != "index":
        return parts[0]
    if parts[1:] in (("__init__",), ("folder",)):
        return "index.folder"
    return f"index.{parts[1]}" if len(parts) > 2 else "index"


def wrong_way_arrows(package: str, layers: list[list[str]], root: Path = ROOT) -> list[str]:
    """Every import arrow between two units that the table does not allow: 'module -> module (unit -> unit)'."""
    rank = {unit: level for level, units in enumerate(layers) for unit in units}
    files = modules(package, root)
    unit = {name: unit_of(path, root / package) for name, path in files.items()}
    found = []
    for source, targets in sorted(import_graph(package, root).items()):
        for target in sorted(targets):
            pair = (unit[source], unit[target])
            if pair[0] == pair[1]:
                continue
            if pair[0] not in rank or pair[1] not in rank or rank[pair[1]] >= rank[pair[0]]:
                found.append(f"{source} -> {target} ({pair[0]} -> {pair[1]})")
    return found


def test_the_layer_table_is_read_from_the_package_docstring():
    assert LAYERS[0] == ["errors", "version"] and LAYERS[-1] == ["__init__", "__main__"]
    assert ["agent", "index.lexical"] in LAYERS and len({u for units in LAYERS for u in units}) == sum(map(len, LAYERS))


def test_every_module_of_garen_infer_sits_in_a_layer():
    placed = {unit for units in LAYERS for unit in units}
    units = {name: unit_of(path, ROOT / "garen_infer") for name, path in modules("garen_infer", ROOT).items()}
    unplaced = sorted(f"{name} ({unit})" for name, unit in units.items() if unit not in placed)
    assert not unplaced, "modules in no layer (add their package to LAYERS): " + ", ".join(unplaced)


def test_every_import_arrow_between_garen_infer_packages_points_down():
    found = wrong_way_arrows("garen_infer", LAYERS)
    assert not found, "imports that point up or sideways (move code down):\n" + "\n".join(found)


def test_the_layer_check_finds_an_upward_lazy_import_and_a_sideways_one(tmp_path):
    """The check itself can fail: a function-level import from a lower layer into a higher one is found, and
    so is an import between two units of one line."""
    sources = {"low/a.py": "def f():\n    from pkg.high.b import g\n    return g\n",
               "high/b.py": "from pkg.low.a import f\n", "side/c.py": "from pkg.low.a import f\n",
               "other/d.py": "import pkg.side.c\n"}
    for name, text in {"__init__.py": "", **sources}.items():
        (tmp_path / "pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / name).write_text(text)
    found = wrong_way_arrows("pkg", [["__init__"], ["low"], ["high"], ["side", "other"]], root=tmp_path)
    assert found == ["pkg.low.a -> pkg.high.b (low -> high)", "pkg.other.d -> pkg.side.c (other -> side)"]


def test_garen_infer_never_imports_garen_train():
    """Training builds on inference (it mines pairs by running methods); what goes back is files on disk."""
    found = sorted(f"{name} imports {candidates[-1]}" for name, path in modules("garen_infer", ROOT).items()
                   for candidates in imported_names(ast.parse(path.read_text(), str(path)))
                   if candidates[-1].split(".")[0] == "garen_train")
    assert not found, "; ".join(found)
