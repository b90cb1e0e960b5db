"""LATTICE's semantic tree (Gupta et al., 2025, sec. 2.1): leaves are documents, internal nodes describe the
documents beneath them. The builders are in ``tree_bottom_up.py`` and ``tree_top_down.py``; the index stage that
runs them is ``semantic_tree_stage.py``.

On disk, a folder (format 1, readable with any JSON tool; no pickles):
- ``meta.json``: the format version, how the tree was built and its shape (depth, fan-out);
- ``nodes.jsonl``: one node per line in depth-first pre-order, so a node's id is its line number (the index the
  traversal's calibration model uses, like the reference code's node registry). An internal node is
  ``{"node", "parent", "depth", "children", "desc", "source"}`` (``source`` says who wrote ``desc``); a leaf is
  ``{"node", "parent", "depth", "doc"}``: its text is the document's.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from garen_infer.errors import GarenError

TREE_FORMAT = 1


@dataclass
class BuiltNode:
    """What a builder returns: an internal node whose children are BuiltNodes or corpus rows (leaves)."""

    desc: str
    source: str
    children: list = field(default_factory=list)


@dataclass
class SemanticTree:
    parent: np.ndarray  # int32, -1 for the root (node 0)
    children: list[list[int]]
    row: np.ndarray  # int32: the corpus row of a leaf, -1 for internal nodes
    depth: np.ndarray  # int32, the root at 0
    desc: list[str]  # internal nodes' descriptions ("" for leaves)
    source: list[str]
    meta: dict = field(default_factory=dict)

    # ---- building -------------------------------------------------------------------------------------------
    @classmethod
    def from_built(cls, root: BuiltNode, meta: dict | None = None) -> SemanticTree:
        """Number the nodes in depth-first pre-order (iteratively: deep trees must not hit the recursion limit)."""
        parent: list[int] = []
        children: list[list[int]] = []
        row, depth, desc, source = [], [], [], []
        stack = [(root, -1, 0)]
        while stack:
            node, up, d = stack.pop()
            me = len(parent)
            parent.append(up)
            depth.append(d)
            children.append([])
            if up >= 0:
                children[up].append(me)
            if isinstance(node, BuiltNode):
                row.append(-1)
                desc.append(node.desc)
                source.append(node.source)
                stack.extend((child, me, d + 1) for child in reversed(node.children))
            else:
                row.append(int(node))
                desc.append("")
                source.append("document")
        tree = cls(np.array(parent, np.int32), children, np.array(row, np.int32), np.array(depth, np.int32),
                   desc, source)
        tree.meta = {**(meta or {}), **tree.shape()}
        return tree

    # ---- reading ------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.parent)

    def is_leaf(self, node: int) -> bool:
        return self.row[node] >= 0

    @cached_property
    def leaf_nodes(self) -> np.ndarray:
        return np.flatnonzero(self.row >= 0)

    @cached_property
    def subtree_end(self) -> np.ndarray:
        """Pre-order puts a node's subtree at node ids [node, subtree_end[node]): the end is the largest end among
        its children, found by one pass from the last node up."""
        end = np.arange(1, len(self) + 1)
        for node in range(len(self) - 1, 0, -1):
            up = self.parent[node]
            end[up] = max(end[up], end[node])
        return end

    @cached_property
    def leaves_before(self) -> np.ndarray:
        """How many leaves precede each node id in pre-order (one entry more, for the end)."""
        return np.concatenate([[0], np.cumsum(self.row >= 0)])

    @cached_property
    def leaf_rows(self) -> np.ndarray:
        """The documents' corpus rows in pre-order: a node's documents are one contiguous slice of it."""
        return self.row[self.row >= 0]

    def rows_beneath(self, node: int) -> np.ndarray:
        """The corpus rows of the documents beneath ``node`` (itself, for a leaf), in pre-order: a view, no walk."""
        before = self.leaves_before
        return self.leaf_rows[before[node] : before[self.subtree_end[node]]]

    def rows_under(self, node: int) -> tuple[int, ...]:
        return tuple(self.rows_beneath(node).tolist())

    @cached_property
    def leaf_count(self) -> np.ndarray:
        """Documents beneath each node."""
        return self.leaves_before[self.subtree_end] - self.leaves_before[:-1]

    def check_preorder(self) -> int | None:
        """The first node whose children do not follow it as consecutive subtrees (None when the numbering is
        depth-first pre-order, which the row slices above rely on)."""
        end = self.subtree_end
        for node in range(len(self)):
            if node and not 0 <= self.parent[node] < node:
                return node
            expected = node + 1
            for child in self.children[node]:
                if child != expected or self.parent[child] != node:
                    return node
                expected = int(end[child])
            if expected != end[node]:
                return node
        return None

    def shape(self) -> dict:
        fanout = np.array([len(c) for c, r in zip(self.children, self.row) if r < 0] or [0])
        leaf_depth = self.depth[self.row >= 0] if (self.row >= 0).any() else np.zeros(1, np.int32)
        return {
            "nodes": len(self), "leaves": int((self.row >= 0).sum()), "internal": int((self.row < 0).sum()),
            "depth": int(leaf_depth.max()), "leaf_depth_mean": round(float(leaf_depth.mean()), 2),
            "fanout": {"min": int(fanout.min()), "max": int(fanout.max()), "mean": round(float(fanout.mean()), 2)},
        }

    # ---- files ----------------------------------------------------------------------------------------------
    def save(self, folder: Path, doc_ids: list[str]) -> None:
        """Write ``meta.json`` and ``nodes.jsonl`` into ``folder`` (the caller makes the folder atomic)."""
        (folder / "meta.json").write_text(json.dumps({"format": TREE_FORMAT, **self.meta}, indent=2,
                                                     ensure_ascii=False) + "\n")
        with open(folder / "nodes.jsonl", "w", encoding="utf-8") as out:
            for node in range(len(self)):
                record: dict[str, object] = {"node": node, "parent": int(self.parent[node]) if node else None,
                                             "depth": int(self.depth[node])}
                if self.is_leaf(node):
                    record["doc"] = doc_ids[self.row[node]]
                else:
                    record.update(children=self.children[node], desc=self.desc[node], source=self.source[node])
                out.write(json.dumps(record, ensure_ascii=False) + "\n")

    @classmethod
    def load(cls, folder: Path, doc_index: dict[str, int]) -> SemanticTree:
        folder = Path(folder)
        try:
            meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise GarenError(f"{folder / 'meta.json'}: unreadable semantic tree ({err}); rebuild the stage") from None
        if meta.get("format") != TREE_FORMAT:
            raise GarenError(f"{folder / 'meta.json'}: semantic tree format {meta.get('format')} is not "
                             f"{TREE_FORMAT}; rebuild the stage")
        children: list[list[int]] = []
        parent, row, depth, desc, source = [], [], [], [], []
        path = folder / "nodes.jsonl"
        with open(path, encoding="utf-8") as handle:
            for line_no, line in enumerate(handle, start=1):
                try:
                    record = json.loads(line)
                    if record["node"] != line_no - 1:
                        raise ValueError(f"node {record['node']} on line {line_no}: nodes must be numbered "
                                         "in file order")
                    parent.append(-1 if record["parent"] is None else int(record["parent"]))
                    depth.append(int(record["depth"]))
                    if "doc" in record:
                        if record["doc"] not in doc_index:
                            raise ValueError(f"document '{record['doc']}' is not in this corpus")
                        row.append(doc_index[record["doc"]])
                        children.append([])
                        desc.append("")
                        source.append("document")
                    else:
                        row.append(-1)
                        children.append([int(c) for c in record["children"]])
                        desc.append(str(record["desc"]))
                        source.append(str(record.get("source", "")))
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
                    raise GarenError(f"{path}, line {line_no}: {err}") from None
        tree = cls(np.array(parent, np.int32), children, np.array(row, np.int32), np.array(depth, np.int32),
                   desc, source, meta)
        bad = tree.check_preorder()
        if bad is not None:
            raise GarenError(f"{path}, line {bad + 1}: node {bad}'s children are not numbered in depth-first "
                             "pre-order; rebuild the stage")
        return tree

    # ---- looking at it --------------------------------------------------------------------------------------
    def outline(self, doc_ids: list[str], max_depth: int = 2, width: int = 100) -> str:
        """The top ``max_depth`` levels, one node per line, indented by depth."""
        shape = self.shape()
        writers = Counter(self.source[n] for n in range(1, len(self)) if not self.is_leaf(n))
        described = ", ".join(f"{count} {source}" for source, count in writers.most_common()) or "none"
        lines = [
            f"semantic tree ({self.meta.get('construction', '?')}, descriptions: {described}): "
            f"{shape['leaves']} documents, {shape['internal']} internal nodes, depth {shape['depth']}, "
            f"fan-out {shape['fanout']['min']}-{shape['fanout']['max']} (mean {shape['fanout']['mean']})"
        ]
        stack = [0]
        while stack:
            node = stack.pop()
            indent = "  " * int(self.depth[node])
            if self.is_leaf(node):
                lines.append(f"{indent}[{node}] doc {doc_ids[self.row[node]]}")
                continue
            text = " ".join(self.desc[node].split()) or "(root)"
            text = text if len(text) <= width else text[: width - 3] + "..."
            lines.append(f"{indent}[{node}] {text}  ({len(self.children[node])} children, "
                         f"{self.leaf_count[node]} documents)")
            if self.depth[node] < max_depth:
                stack.extend(reversed(self.children[node]))
        return "\n".join(lines)
