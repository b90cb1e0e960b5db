"""The released-tree reader is a security boundary: a pickle from the hub may be anyone's. Each test here is one
side of it, as an attacker would try it: the allow-list (exact names, not whole modules), the resource limits (file
size, claimed lengths, node count), and hostile shapes (cycles, shared nodes, wrong types, repeated and missing
leaves). Every one must end in one GarenError line naming the file, never a traceback or a hang."""

from __future__ import annotations

import pickle
import struct

import numpy as np
import pytest

from garen_infer.errors import GarenError
from garen_infer.index.tree import tree_import
from garen_infer.index.tree.tree_import import NUMPY_NAMES, read_released_tree

DOCS = ["a", "b", "c", "d"]


def leaf(doc) -> dict:
    return {"id": doc, "desc": "", "child": None}


def tree(*leaves, desc="root") -> dict:
    return {"desc": desc, "child": [{"desc": "topic", "child": list(leaves)}]}


def refused(tmp_path, payload, message: str, docs=DOCS, raw: bytes | None = None) -> str:
    path = tmp_path / "tree.pkl"
    path.write_bytes(raw if raw is not None else pickle.dumps(payload))
    with pytest.raises(GarenError, match=message) as err:
        read_released_tree(path, docs)
    assert "\n" not in str(err.value) and str(path) in str(err.value)
    return str(err.value)


def global_call(module: str, name: str, *args: bytes) -> bytes:
    """A protocol-2 pickle that calls module.name(*args) with string arguments."""
    body = b"".join(b"X" + struct.pack("<I", len(a)) + a for a in args)
    return b"\x80\x02c" + f"{module}\n{name}\n".encode() + b"(" + body + b"tR."


def test_a_well_formed_tree_with_numpy_embeddings_is_read(tmp_path):
    top = tree(*map(leaf, DOCS))
    top["child"][0]["embs"] = np.arange(4, dtype=np.float32)
    top["embs"] = np.float32(1.5)  # a numpy scalar pickles through numpy's scalar constructor
    path = tmp_path / "tree.pkl"
    path.write_bytes(pickle.dumps(top))
    assert read_released_tree(path, DOCS).children[0].children == [0, 1, 2, 3]


@pytest.mark.parametrize("module, name", [
    ("numpy", "load"),  # reads another pickle, with pickles allowed
    ("numpy.testing._private.utils", "runstring"),  # exec
    ("numpy.lib.npyio", "load"),
    ("numpy.core.multiarray", "_reconstruct_anything"),
    ("builtins", "eval"),
    ("os", "system"),
    ("tree_import", "SemanticNodeX"),
])
def test_the_allow_list_is_exact_names_never_a_whole_module(tmp_path, module, name):
    assert (module, name) not in NUMPY_NAMES
    refused(tmp_path, None, f"asks for {module}.{name}", raw=global_call(module, name, b"x"))


def test_the_allow_list_holds_only_the_constructors_of_arrays_and_scalars():
    assert {name for _, name in NUMPY_NAMES} == {"_reconstruct", "ndarray", "dtype", "scalar"}
    assert {module for module, _ in NUMPY_NAMES} <= {"numpy", "numpy.core.multiarray", "numpy._core.multiarray"}


@pytest.mark.parametrize("raw, message", [
    (global_call("numpy.core.multiarray", "_reconstruct", b"x", b"y"), "not a readable tree pickle"),  # wrong arguments
    (b"\x80\x04\x8e" + struct.pack("<Q", 2**40) + b"abc.", "not a readable tree pickle"),  # BINBYTES8 claiming 1 TiB
    (b"\x80\x02]q\x00(" + b"h\x00" * 10 + b"e.", "is a list, not a dict"),  # a list of itself
    (b"garbage", "not a readable tree pickle"),
    (b"", "not a readable tree pickle"),
])
def test_hostile_bytes_end_in_one_line(tmp_path, raw, message):
    refused(tmp_path, None, message, raw=raw)


def test_a_file_larger_than_a_tree_of_the_corpus_is_not_read(tmp_path, monkeypatch):
    monkeypatch.setattr(tree_import, "FIXED_BYTES", 1000)
    monkeypatch.setattr(tree_import, "BYTES_PER_DOCUMENT", 10)
    payload = tree(*map(leaf, DOCS), desc="x" * 2000)
    refused(tmp_path, payload, "larger than 0 MiB")


def test_a_node_that_is_its_own_child_or_shared_is_refused_not_looped(tmp_path):
    looped = {"desc": "root", "child": []}
    looped["child"].append(looped)
    refused(tmp_path, looped, "a node appears twice")
    deeper = tree(*map(leaf, DOCS))
    deeper["child"][0]["child"].append(deeper["child"][0])  # its own ancestor, a level down
    refused(tmp_path, deeper, "a node appears twice")
    shared = {"desc": "topic", "child": [leaf("a"), leaf("b")]}
    refused(tmp_path, {"desc": "root", "child": [shared, shared]}, "a node appears twice")


def test_more_nodes_than_a_tree_of_the_corpus_has_is_refused(tmp_path):
    chain = leaf("a")
    for _ in range(tree_import.NODES_PER_DOCUMENT * len(DOCS) + 2):
        chain = {"desc": "one child", "child": [chain]}
    refused(tmp_path, chain, f"more than {tree_import.NODES_PER_DOCUMENT * len(DOCS)} nodes")


@pytest.mark.parametrize("node, message", [
    ({"desc": {"nested": [1, 2]}, "child": [leaf("a")]}, "'desc' is a dict, not text"),
    ({"desc": 3, "child": [leaf("a")]}, "'desc' is a int, not text"),
    ({"desc": "x", "child": "abc"}, "'child' is a str, not a list of nodes"),
    ({"desc": "x", "child": {"a": 1}}, "'child' is a dict, not a list of nodes"),
    ("a string", "a node is a str"),
    ({"desc": "x", "child": [leaf(True)]}, "neither a document id nor a row"),
    ({"desc": "x", "child": [leaf(1.0)]}, "neither a document id nor a row"),
    ({"desc": "x", "child": [leaf(None)]}, "neither a document id nor a row"),
])
def test_fields_of_the_wrong_type_are_refused(tmp_path, node, message):
    refused(tmp_path, {"desc": "root", "child": [node]}, message)


@pytest.mark.parametrize("row", [len(DOCS), len(DOCS) + 1, -1, 2**70])
def test_a_leaf_row_outside_the_corpus_is_refused(tmp_path, row):
    leaves = [leaf(0), leaf(1), leaf(2), leaf(row)]
    refused(tmp_path, tree(*leaves), f"leaf id {row} is neither a document id nor a row")


def test_the_last_row_of_the_corpus_is_a_leaf(tmp_path):
    path = tmp_path / "tree.pkl"
    path.write_bytes(pickle.dumps(tree(*(leaf(np.int64(r)) for r in range(len(DOCS))))))
    assert read_released_tree(path, DOCS).children[0].children == [0, 1, 2, 3]


def test_leaves_must_name_each_document_exactly_once(tmp_path):
    refused(tmp_path, tree(leaf("a"), leaf("b"), leaf("[7] a"), leaf("c"), leaf("d")),
            "document 'a' is the leaf of two nodes")
    refused(tmp_path, tree(leaf("b"), leaf(1)), "document 'b' is the leaf of two nodes")  # by id, then by row
    message = refused(tmp_path, tree(leaf("a"), leaf("b")), "name 2 of the corpus's 4 documents")
    assert "'c'" in message
