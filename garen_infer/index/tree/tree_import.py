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
refused in one line naming what the file asked for. The file is read whole into memory first, up to a size a tree
of the corpus can have (a length field claiming more bytes than the file holds then fails as a truncated pickle,
never as a huge allocation), and the tree it holds is checked before use: no node is its own ancestor or appears
twice, every description is text, and the leaves name each document of the corpus exactly once.
"""

from __future__ import annotations

import io
import numbers
import pickle
from pathlib import Path

from garen_infer.errors import GarenError
from garen_infer.index.tree.semantic_tree import BuiltNode

SOURCE = "released"  # who wrote the internal nodes' descriptions (semantic_tree.py's ``source``)
# exactly the names a pickled numpy array or scalar asks for (numpy 1 and 2), never a whole module
NUMPY_NAMES = frozenset({("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                         ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
                         ("numpy._core.multiarray", "scalar")})
FIXED_BYTES, BYTES_PER_DOCUMENT = 64 << 20, 16 << 10  # a node's description and embedding take a few KiB
NODES_PER_DOCUMENT = 4  # a leaf per document, and internal nodes fewer than that (a chain of one-child nodes aside)


class _Node:
    """A released ``SemanticNode`` read as a record of its fields, nothing more."""

    def __setstate__(self, state):
        self.__dict__.update(state if isinstance(state, dict) else {})


class _TreeUnpickler(pickle.Unpickler):
    def __init__(self, file, path: Path):
        super().__init__(file)
        self.path = path

    def find_class(self, module: str, name: str):
        if name == "SemanticNode":
            return _Node
        if (module, name) in NUMPY_NAMES:
            return super().find_class(module, name)
        raise GarenError(f"{self.path}: the tree file asks for {module}.{name}; a released LATTICE tree "
                         f"holds only nodes (dicts or SemanticNode), strings, numbers and numpy arrays")


def read_released_tree(path: Path, doc_ids: list[str]) -> BuiltNode:
    """The tree in ``path`` with its leaves as corpus rows (``doc_ids`` in corpus order)."""
    top = _unpickled(path, FIXED_BYTES + BYTES_PER_DOCUMENT * len(doc_ids))
    row_of = {d: r for r, d in enumerate(doc_ids)}
    root = BuiltNode(_desc(top, path), SOURCE)
    stack, seen = [(top, root)], {id(top)}
    rows: dict[int, object] = {}
    while stack:  # iteratively: a deep tree must not hit the recursion limit
        node, built = stack.pop()
        for child in _children(node, path):
            if id(child) in seen:
                raise GarenError(f"{path}: a node appears twice in the tree (a node that is its own ancestor, or "
                                 f"one shared by two parents); a released tree is a tree")
            seen.add(id(child))
            if len(seen) > NODES_PER_DOCUMENT * len(doc_ids) + 1:
                raise GarenError(f"{path}: more than {NODES_PER_DOCUMENT * len(doc_ids)} nodes for "
                                 f"{len(doc_ids)} documents; not a tree of this corpus")
            if _children(child, path):
                inner = BuiltNode(_desc(child, path), SOURCE)
                built.children.append(inner)
                stack.append((child, inner))
            else:
                built.children.append(_new_leaf(_field(child, "id", path), row_of, doc_ids, rows, path))
    if not root.children:
        raise GarenError(f"{path}: the tree's root has no children")
    _check_coverage(rows, doc_ids, path)
    return root


def _unpickled(path: Path, max_bytes: int):
    """The object a tree file holds, read by the allow-listed unpickler from at most ``max_bytes``."""
    if not path.is_file():
        raise GarenError(f"semantic_tree.tree_file: no file at {path} (LATTICE's trees: git clone "
                         f"https://huggingface.co/datasets/quicktensor/lattice-bright-trees, then "
                         f"<task>/tree-bottom-up.pkl or tree-top-down.pkl)")
    with open(path, "rb") as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise GarenError(f"{path}: larger than {max_bytes >> 20} MiB, more than a tree of this corpus takes "
                         f"(a tree of another corpus?)")
    try:
        return _TreeUnpickler(io.BytesIO(data), path).load()
    except GarenError:
        raise
    except Exception as err:  # whatever a hostile pickle makes the allowed constructors raise
        raise GarenError(f"{path}: not a readable tree pickle ({type(err).__name__}: {err})") from None


def _field(node, name: str, path: Path):
    if isinstance(node, dict):
        return node.get(name)
    if isinstance(node, _Node):
        return node.__dict__.get(name)
    raise GarenError(f"{path}: a node is a {type(node).__name__}, not a dict or SemanticNode")


def _children(node, path: Path) -> list:
    children = _field(node, "child", path)
    if children is None:
        return []
    if not isinstance(children, (list, tuple)):
        raise GarenError(f"{path}: a node's 'child' is a {type(children).__name__}, not a list of nodes")
    return list(children)


def _desc(node, path: Path) -> str:
    desc = _field(node, "desc", path)
    if desc is None:
        return ""
    if not isinstance(desc, str):
        raise GarenError(f"{path}: a node's 'desc' is a {type(desc).__name__}, not text")
    return desc


def _new_leaf(node_id, row_of: dict[str, int], doc_ids: list[str], rows: dict[int, object], path: Path) -> int:
    """A leaf's corpus row, recorded in ``rows``; a document named by a second leaf is refused."""
    row = _leaf_row(node_id, row_of, doc_ids, path)
    if row in rows:
        raise GarenError(f"{path}: document '{doc_ids[row]}' is the leaf of two nodes ({rows[row]!r} and "
                         f"{node_id!r}); a released tree names each document once")
    rows[row] = node_id
    return row


def _leaf_row(node_id, row_of: dict[str, int], doc_ids: list[str], path: Path) -> int:
    """A leaf's corpus row from its id, read as the authors' ``get_node_id`` reads it."""
    if isinstance(node_id, str):
        doc = node_id.split(" ", 1)[1] if node_id.startswith("[") and " " in node_id else node_id
        if doc not in row_of:
            raise GarenError(f"{path}: leaf '{node_id}' names document '{doc}', which this corpus lacks "
                             f"(a tree of another BRIGHT task or document variant?)")
        return row_of[doc]
    if isinstance(node_id, numbers.Integral) and not isinstance(node_id, bool) and 0 <= int(node_id) < len(doc_ids):
        return int(node_id)
    raise GarenError(f"{path}: leaf id {node_id!r} is neither a document id nor a row of this corpus")


def _check_coverage(rows: dict[int, object], doc_ids: list[str], path: Path) -> None:
    if len(rows) < len(doc_ids):
        missing = next(d for r, d in enumerate(doc_ids) if r not in rows)
        raise GarenError(f"{path}: the tree's leaves name {len(rows)} of the corpus's {len(doc_ids)} documents "
                         f"('{missing}' is not among them); a tree of another corpus or document variant?")
