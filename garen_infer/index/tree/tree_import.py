"""LATTICE's released semantic trees (``semantic_tree: {construction: released, tree_file: ...}``), the trees
GAREN's Table 7 runs LATTICE on ("the official pre-built semantic trees released by the authors").

The authors publish one tree per BRIGHT task and construction as the hub dataset
``quicktensor/lattice-bright-trees`` (their README: cloned into ``trees/BRIGHT``), each file
``<task>/tree-<bottom-up|top-down>.pkl``: a pickled node, either the dict of their ``SemanticNode.to_dict``
or a ``SemanticNode`` object, with ``desc`` (an internal node's description), ``id`` and ``child`` (a list of
nodes; ``None`` or empty for a leaf). A leaf's ``id`` names its document: ``"[<n>] <doc id>"``, the doc id
itself, or an integer row of BRIGHT's documents split.

A pickle can run code when it is read, so this reader lets it build only dicts, lists, strings, numbers and
numpy arrays (the nodes' optional ``embs``), and a ``SemanticNode`` as a plain record; anything else is
refused in one line naming what the file asked for.
"""

from __future__ import annotations

import numbers
import pickle
from pathlib import Path

from garen_infer.errors import GarenError
from garen_infer.index.tree.semantic_tree import BuiltNode

SOURCE = "released"  # who wrote the internal nodes' descriptions (semantic_tree.py's ``source``)
_NUMPY = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
          ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
          ("numpy._core.multiarray", "scalar")}


class _Node:
    """A released ``SemanticNode`` read as a record of its fields, nothing more."""

    def __setstate__(self, state):
        self.__dict__.update(state if isinstance(state, dict) else {})


class _TreeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if name == "SemanticNode":
            return _Node
        if (module, name) in _NUMPY:
            return super().find_class(module, name)
        raise GarenError(f"{self.path}: the tree file asks for {module}.{name}; a released LATTICE tree "
                         f"holds only nodes (dicts or SemanticNode), strings, numbers and numpy arrays")


def read_released_tree(path: Path, doc_ids: list[str]) -> BuiltNode:
    """The tree in ``path`` with its leaves as corpus rows (``doc_ids`` in corpus order)."""
    if not path.is_file():
        raise GarenError(f"semantic_tree.tree_file: no file at {path} (LATTICE's trees: git clone "
                         f"https://huggingface.co/datasets/quicktensor/lattice-bright-trees, then "
                         f"<task>/tree-bottom-up.pkl or tree-top-down.pkl)")
    with open(path, "rb") as file:
        unpickler = _TreeUnpickler(file)
        unpickler.path = path
        try:
            top = unpickler.load()
        except (pickle.UnpicklingError, EOFError, AttributeError, ValueError) as err:
            raise GarenError(f"{path}: not a readable tree pickle ({err})") from None
    row_of = {d: r for r, d in enumerate(doc_ids)}
    root = BuiltNode(_field(top, "desc", path) or "", SOURCE)
    stack = [(top, root)]
    while stack:  # iteratively: a deep tree must not hit the recursion limit
        node, built = stack.pop()
        for child in _field(node, "child", path) or []:
            if _field(child, "child", path):
                inner = BuiltNode(_field(child, "desc", path) or "", SOURCE)
                built.children.append(inner)
                stack.append((child, inner))
            else:
                built.children.append(_leaf_row(_field(child, "id", path), row_of, doc_ids, path))
    if not root.children:
        raise GarenError(f"{path}: the tree's root has no children")
    return root


def _field(node, name: str, path: Path):
    if isinstance(node, dict):
        return node.get(name)
    if isinstance(node, _Node):
        return node.__dict__.get(name)
    raise GarenError(f"{path}: a node is a {type(node).__name__}, not a dict or SemanticNode")


def _leaf_row(node_id, row_of: dict[str, int], doc_ids: list[str], path: Path) -> int:
    """A leaf's corpus row from its id, read as the authors' ``get_node_id`` reads it."""
    if isinstance(node_id, str):
        doc = node_id.split(" ", 1)[1] if node_id.startswith("[") and " " in node_id else node_id
        if doc not in row_of:
            raise GarenError(f"{path}: leaf '{node_id}' names document '{doc}', which this corpus lacks "
                             f"(a tree of another BRIGHT task or document variant?)")
        return row_of[doc]
    if isinstance(node_id, numbers.Integral) and 0 <= int(node_id) < len(doc_ids):
        return int(node_id)
    raise GarenError(f"{path}: leaf id {node_id!r} is neither a document id nor a row of this corpus")
