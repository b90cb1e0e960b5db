"""LATTICE's released semantic trees read into an index (semantic_tree: {construction: released}): the two
shapes the authors' pickles take (SemanticNode.to_dict's dicts, or SemanticNode objects), their three kinds of
leaf id, and a pickle that asks for anything else refused before it can run."""

from __future__ import annotations

import os
import pickle
import shutil
import sys
import types

import numpy as np
import pytest

from garen_infer.errors import GarenError
from garen_infer.index.folder import IndexFolder
from garen_infer.index.stages import IndexConfig
from garen_infer.index.tree.tree_import import read_released_tree


def released(doc_ids: list[str]) -> dict:
    """A two-level tree in SemanticNode.to_dict's shape: topics by id prefix, leaves "[n] <doc id>"."""
    topics = sorted({d[:2] for d in doc_ids})
    return {"id": None, "desc": "root", "embs": None, "child": [
        {"id": None, "desc": f"topic {t}", "embs": np.ones(3, np.float32), "child": [
            {"id": f"[{n}] {d}", "desc": "", "embs": None, "child": None}
            for n, d in enumerate(doc_ids) if d.startswith(t)]} for t in topics]}


def test_a_released_tree_becomes_the_index_stage(tiny_dataset, tiny_index, tmp_path):
    tree_file = tmp_path / "tree-bottom-up.pkl"
    tree_file.write_bytes(pickle.dumps(released(tiny_dataset.doc_ids)))
    path = tmp_path / "index"
    shutil.copytree(tiny_index.path, path)
    stage = {"construction": "released", "tree_file": str(tree_file)}
    config = IndexConfig.from_dict({"semantic_tree": stage})
    index = IndexFolder.build(tiny_dataset, path, config, log=lambda *_: None)
    tree = index.manifest["stages"]["semantic_tree"]["info"]
    assert tree["construction"] == "released" and tree["tree_file"] == "tree-bottom-up.pkl"
    from garen_infer.index.tree.semantic_tree import SemanticTree

    loaded = SemanticTree.load(path / "semantic_tree", tiny_dataset.doc_index)
    assert sorted(loaded.leaf_rows.tolist()) == list(range(len(tiny_dataset.doc_ids)))
    assert {loaded.desc[c] for c in loaded.children[0]} == {f"topic {t}" for t in ("ph", "py", "vo")}
    assert set(loaded.source) >= {"released"}


def test_semantic_node_objects_and_every_leaf_id_form(monkeypatch, tmp_path):
    """The authors' code also pickles SemanticNode objects; leaves may name a document by id or by row."""
    module = types.ModuleType("tree_objects")

    class SemanticNode:
        def __init__(self, id=None, desc="", child=()):
            self.id, self.desc, self.child = id, desc, list(child)

    SemanticNode.__module__, SemanticNode.__qualname__ = "tree_objects", "SemanticNode"
    module.SemanticNode = SemanticNode
    monkeypatch.setitem(sys.modules, "tree_objects", module)
    leaves = [SemanticNode("[0] a"), SemanticNode("b"), SemanticNode(np.int64(2))]
    path = tmp_path / "tree.pkl"
    inner = SemanticNode(desc="inner", child=leaves)
    path.write_bytes(pickle.dumps(SemanticNode(desc="root", child=[inner])))
    monkeypatch.delitem(sys.modules, "tree_objects")  # read without the authors' code
    root = read_released_tree(path, ["a", "b", "c"])
    assert root.desc == "root" and root.children[0].desc == "inner" and root.children[0].children == [0, 1, 2]


class _Exploit:
    def __reduce__(self):
        return os.system, ("echo owned",)


@pytest.mark.parametrize("payload, message", [
    (_Exploit(), r"asks for (posix|nt)\.system"),
    ({"desc": "root", "child": [{"id": "[0] zz", "child": None}]},
     "names document 'zz', which this corpus lacks"),
])
def test_what_cannot_be_read_is_refused_in_one_line(payload, message, tmp_path):
    path = tmp_path / "tree.pkl"
    path.write_bytes(pickle.dumps(payload))
    with pytest.raises(GarenError, match=message):
        read_released_tree(path, ["a"])
    with pytest.raises(GarenError, match="quicktensor/lattice-bright-trees"):
        read_released_tree(tmp_path / "missing.pkl", ["a"])
