"""The packages of garen_infer are layers: every import arrow between them points down the table ``LAYERS``
(storage at the bottom, the doors at the top), and no module imports one that imports it back.

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


# garen_infer's layers, bottom to top. A module may import modules of its own unit and of any unit on a
# lower line; units on one line stand side by side and import none of each other. A unit is a package
# (``running``), a root module (``errors``), or inside ``index/`` a sub-package (``index.tree``); ``index`` is
# index/'s own modules but for the folder that opens them all (``index.folder``: folder.py and __init__.py).
LAYERS = [
    ["errors"],  # the one exception type every refusal raises
    ["settings"],  # typed fields: every configuration is checked against them
    ["data"],  # corpora, queries, judgments and their loaders
    ["storage"],  # atomic writes, append logs, writer locks, folder kinds, TREC files (read by data's reader)
    ["llm"],  # models by role: backends, encoders, prompts, answer parsing, cache, ledger
    ["agent", "index.lexical"],  # RARG's shell agent; BM25 with its analyzers
    ["index"],  # the stage registry, vectors and graphs, the first stage
    ["index.grouping"],  # GAREN's groups stage: partitions, summaries (written by an LLM), the groups format
    ["index.tree"],  # LATTICE's semantic tree stage, built from grouping's partitions and summaries
    ["index.folder"],  # an index folder: opens whatever its stages built
    ["methods", "evaluation"],  # the retrieval methods; metrics, reachability, cost
    ["configuration"],  # presets, checked against every typed config below
    ["running"],  # the scheduler, the runner, shards, merges, repeated seeds
    ["report", "testing"],  # tables and figures over run folders; scripted models for tests of methods
    ["doors"],  # cli, api, pyterrier, demo
    ["__init__", "__main__"],  # garen_infer.Index / Retriever, python -m garen_infer
]
# Arrows that point up and are known, with why; each should go, none may be added.
TOLERATED = {
    ("configuration", "running"): "the run configuration's type (RunConfig) is defined beside the runner",
}


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


def wrong_way_arrows(package: str, layers: list[list[str]], tolerated=(), root: Path = ROOT) -> list[str]:
    """Every import arrow between two units that the table does not allow: 'module -> module (unit -> unit)'."""
    rank = {unit: level for level, units in enumerate(layers) for unit in units}
    files = modules(package, root)
    unit = {name: unit_of(path, root / package) for name, path in files.items()}
    found = []
    for source, targets in sorted(import_graph(package, root).items()):
        for target in sorted(targets - {package}):  # the package itself: __version__, readable from anywhere
            pair = (unit[source], unit[target])
            if pair[0] == pair[1] or pair in tolerated:
                continue
            if pair[0] not in rank or pair[1] not in rank or rank[pair[1]] >= rank[pair[0]]:
                found.append(f"{source} -> {target} ({pair[0]} -> {pair[1]})")
    return found


def test_every_module_of_garen_infer_sits_in_a_layer():
    placed = {unit for units in LAYERS for unit in units}
    units = {name: unit_of(path, ROOT / "garen_infer") for name, path in modules("garen_infer", ROOT).items()}
    unplaced = sorted(f"{name} ({unit})" for name, unit in units.items() if unit not in placed)
    assert not unplaced, "modules in no layer (add their package to LAYERS): " + ", ".join(unplaced)


def test_every_import_arrow_between_garen_infer_packages_points_down():
    found = wrong_way_arrows("garen_infer", LAYERS, TOLERATED)
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
