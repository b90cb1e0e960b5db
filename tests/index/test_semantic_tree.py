"""LATTICE's semantic tree: the file format, the outline, and both builders (bottom-up with extractive descriptions;
top-down with a scripted generator, and its counted fallbacks when the generator's answers are unusable)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from tree_generators import TOPIC, ScriptedGenerator, ScriptedTreeBackend

from garen_infer.errors import GarenError
from garen_infer.index.tree.semantic_tree import BuiltNode, SemanticTree
from garen_infer.index.tree.semantic_tree_stage import SemanticTreeParams


def small_tree() -> SemanticTree:
    return SemanticTree.from_built(BuiltNode("", "root", [BuiltNode("rocks: about rocks", "x", [0, 1]), 2]),
                                   {"construction": "hand"})


def test_tree_numbering_shape_and_round_trip(tmp_path):
    tree = small_tree()
    assert tree.parent.tolist() == [-1, 0, 1, 1, 0] and tree.row.tolist() == [-1, -1, 0, 1, 2]
    assert tree.children == [[1, 4], [2, 3], [], [], []] and tree.leaf_count.tolist() == [3, 2, 1, 1, 1]
    assert tree.meta["depth"] == 2 and tree.meta["fanout"] == {"min": 2, "max": 2, "mean": 2.0}
    tree.save(tmp_path, ["d0", "d1", "d2"])
    lines = [json.loads(line) for line in (tmp_path / "nodes.jsonl").read_text().splitlines()]
    assert lines[1] == {"node": 1, "parent": 0, "depth": 1, "children": [2, 3], "desc": "rocks: about rocks",
                        "source": "x"}
    assert lines[4] == {"node": 4, "parent": 0, "depth": 1, "doc": "d2"}
    loaded = SemanticTree.load(tmp_path, {"d0": 0, "d1": 1, "d2": 2})
    assert loaded.children == tree.children and loaded.row.tolist() == tree.row.tolist() and loaded.desc == tree.desc
    assert json.loads((tmp_path / "meta.json").read_text())["format"] == 1


def test_loading_a_bad_tree_names_file_and_line(tmp_path):
    small_tree().save(tmp_path, ["d0", "d1", "d2"])
    with pytest.raises(GarenError, match=r"nodes.jsonl, line 3: document 'd0' is not in this corpus"):
        SemanticTree.load(tmp_path, {"d1": 1, "d2": 2})
    (tmp_path / "meta.json").write_text('{"format": 99}')
    with pytest.raises(GarenError, match="format 99 is not 1; rebuild"):
        SemanticTree.load(tmp_path, {"d0": 0, "d1": 1, "d2": 2})


def walk(tree: SemanticTree, node: int) -> list[int]:
    """The rows beneath ``node`` by walking its subtree, to check the pre-order slices against."""
    if tree.is_leaf(node):
        return [int(tree.row[node])]
    return [row for child in tree.children[node] for row in walk(tree, child)]


def test_a_nodes_documents_are_one_pre_order_slice():
    deep = BuiltNode("", "root", [BuiltNode("a", "x", [BuiltNode("a1", "x", [4, 0]), 2, BuiltNode("a2", "x", [])]),
                                  5, BuiltNode("b", "x", [BuiltNode("b1", "x", [1, 3])])])
    tree = SemanticTree.from_built(deep)
    assert tree.check_preorder() is None
    for node in range(len(tree)):
        assert list(tree.rows_under(node)) == walk(tree, node) and tree.leaf_count[node] == len(walk(tree, node))
    assert tree.rows_under(0) == (4, 0, 2, 5, 1, 3) and tree.rows_under(6) == ()  # a2 has no documents


def test_a_tree_file_out_of_pre_order_is_refused(tmp_path):
    small_tree().save(tmp_path, ["d0", "d1", "d2"])
    lines = (tmp_path / "nodes.jsonl").read_text().splitlines()
    root = json.loads(lines[0])
    root["children"] = [4, 1]  # the document before the subtree that precedes it in the file
    (tmp_path / "nodes.jsonl").write_text("\n".join([json.dumps(root)] + lines[1:]) + "\n")
    with pytest.raises(GarenError,
                       match=r"nodes.jsonl, line 1: node 0's children are not numbered in depth-first "
                       r"pre-order; rebuild"):
        SemanticTree.load(tmp_path, {"d0": 0, "d1": 1, "d2": 2})


def test_outline_shows_the_top_levels():
    text = small_tree().outline(["d0", "d1", "d2"], max_depth=1)
    assert text.splitlines()[1:] == ["[0] (root)  (2 children, 3 documents)",
                                     "  [1] rocks: about rocks  (2 children, 2 documents)", "  [4] doc d2"]
    assert "depth 2, fan-out 2-2" in text.splitlines()[0]


# ---- bottom-up -----------------------------------------------------------------------------------------------
def test_balanced_clusters_respect_the_capacity_and_the_planted_clusters():
    from garen_infer.index.tree.tree_bottom_up import balanced_clusters, layer_size

    rng = np.random.default_rng(0)
    vectors = np.concatenate([c + rng.normal(size=(40, 8)) for c in rng.normal(size=(3, 8)) * 5]).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    clusters = balanced_clusters(vectors, 12, 10, seed=1)
    assert sorted(i for c in clusters for i in c) == list(range(120)) and max(len(c) for c in clusters) <= 10
    assert all(len({i // 40 for i in c}) == 1 for c in clusters)  # no cluster straddles two planted ones
    assert clusters == balanced_clusters(vectors, 12, 10, seed=1)
    same = balanced_clusters(np.ones((25, 4), np.float32) / 2, 3, 10, seed=1)  # identical points: capacity splits
    assert sorted(len(c) for c in same) == [5, 10, 10]
    # one fan-out for every layer: 5,183 documents under M = 20 -> 3 layers of about 17.3
    assert layer_size(5183, 20) == pytest.approx(5183 ** (1 / 3)) and layer_size(400, 20) == pytest.approx(20.0)
    assert layer_size(21, 20) == pytest.approx(21 ** 0.5)


def check_tree(tree: SemanticTree, n_docs: int, max_children: int):
    """Every document is exactly one leaf, and no node has more than M children."""
    assert sorted(tree.row[tree.leaf_nodes].tolist()) == list(range(n_docs))
    assert max(len(c) for c in tree.children) <= max_children
    assert all(tree.desc[n] for n in range(1, len(tree)) if not tree.is_leaf(n))  # every internal node described


def test_bottom_up_stage_on_the_tiny_corpus(tiny_dataset, tiny_index, tmp_path):
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig

    folder = tmp_path / "index"
    shutil.copytree(tiny_index.path, folder)
    config = IndexConfig.from_dict({"semantic_tree": {"construction": "bottom-up", "max_children": 3}})
    built = IndexFolder.build(tiny_dataset, folder, config, log=lambda m: None)
    info = built.manifest["stages"]["semantic_tree"]["info"]
    assert info["summarizer"] == "extractive" and info["description_fallbacks"] == 0 and info["depth"] >= 2
    tree = SemanticTree.load(folder / "semantic_tree", tiny_dataset.doc_index)
    check_tree(tree, 12, 3)
    assert info["fanout"]["max"] <= 3 and info["nodes"] == len(tree)


# ---- top-down with a scripted generator -------------------------------------------------------------------------
def test_top_down_with_a_generator_partitions_by_its_clusters(tiny_dataset, tiny_index):
    from garen_infer.index.tree.tree_top_down import TopDownBuilder

    params = SemanticTreeParams(construction="top-down", max_children=3, min_clusters=2)
    texts = [d.full_text for d in tiny_dataset.documents]
    builder = TopDownBuilder(texts, tiny_index.embeddings, ScriptedGenerator(ScriptedTreeBackend()), params,
                             log=lambda m: None)
    root, levels = builder.build()
    tree = SemanticTree.from_built(root)
    check_tree(tree, 12, 3)
    assert vars(builder.stats) == {"level_fallbacks": 0, "partition_fallbacks": 0, "no_level_fits": 0, "unassigned": 0}
    assert levels[0] == ["science", "vol", "vol topics", "vol subtopics", "vol1 specifics"]
    # the root's children are the three topics, each described by the generator
    doc_ids = tiny_dataset.doc_ids
    topics = [{TOPIC[doc_ids[tree.row[leaf]]] for leaf in leaves_under(tree, child)} for child in tree.children[0]]
    assert sorted(map(sorted, topics)) == [["pho"], ["py"], ["vol"]]
    assert {tree.source[c] for c in tree.children[0]} == {"scripted-llm"} and tree.desc[1].startswith("group ")


def leaves_under(tree, node):
    stack, out = [node], []
    while stack:
        n = stack.pop()
        out.extend([n] if tree.is_leaf(n) else tree.children[n])
        stack.extend(c for c in tree.children[n] if not tree.is_leaf(c))
    return [n for n in out if tree.is_leaf(n)]


def test_top_down_falls_back_explicitly_when_the_generator_fails(tiny_dataset, tiny_index):
    from garen_infer.index.tree.tree_top_down import TopDownBuilder

    params = SemanticTreeParams(construction="top-down", max_children=3, min_clusters=2, retries=1)
    texts = [d.full_text for d in tiny_dataset.documents]
    builder = TopDownBuilder(texts, tiny_index.embeddings,
                             ScriptedGenerator(ScriptedTreeBackend(broken=True)), params, log=lambda m: None)
    root, levels = builder.build()
    tree = SemanticTree.from_built(root)
    check_tree(tree, 12, 3)
    assert builder.stats.level_fallbacks == 12  # every document got extractive levels
    assert builder.stats.partition_fallbacks == sum(1 for n in range(len(tree)) if tree.leaf_count[n] > 3)
    assert all(tree.source[n] == "extractive" for n in range(1, len(tree)) if not tree.is_leaf(n))
    assert levels[0][0] and levels[0][-1].startswith(levels[0][0])  # level k: the k most distinctive terms


def test_clustering_answers_that_cannot_split_are_rejected():
    from garen_infer.index.tree.tree_top_down import parse_clusters, parse_levels

    one = json.dumps({"clusters": [{"name": "all", "description": "d", "members": [0, 1, 2]}]})
    assert parse_clusters(one, 3, 5) is None  # a single cluster is no partition
    many = json.dumps({"clusters": [{"name": str(i), "description": "d", "members": [i]} for i in range(4)]})
    assert parse_clusters(many, 4, 3) is None  # more than M clusters
    dup = json.dumps({"clusters": [{"name": "a", "members": [0, 1, 9]}, {"name": "b", "members": [1, 2]}]})
    assert parse_clusters(dup, 3, 5) == [("a", [0, 1]), ("b", [2])]  # out of range dropped, first cluster wins
    assert parse_levels('{"levels": ["a", "b c", "d"]}', 3) == ["a", "b c", "d"]
    assert parse_levels('{"levels": ["a", ""]}', 2) is None and parse_levels("nope", 2) is None


def test_top_down_needs_a_generator(tiny_dataset, tiny_index, tmp_path):
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig

    folder = tmp_path / "index"
    shutil.copytree(tiny_index.path, folder)
    config = IndexConfig.from_dict({"semantic_tree": {"construction": "top-down"}})
    with pytest.raises(GarenError, match="top-down construction needs a generator"):
        IndexFolder.build(tiny_dataset, folder, config, log=lambda m: None)
    with pytest.raises(GarenError, match="construction='sideways': expected one of 'bottom-up', 'top-down'"):
        IndexConfig.from_dict({"semantic_tree": {"construction": "sideways"}})
