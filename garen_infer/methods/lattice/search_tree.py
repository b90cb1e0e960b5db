"""One query's view of the semantic tree during LATTICE's search (the reference code's prediction tree).

A node is *reached* once its parent was expanded and it was shown in that slate (the root is reached from the
start); it then has a local score (its slate score), a calibrated score (the latent score of the last fit) and a
path relevance. The frontier is every reached internal node not yet expanded; leaves reached are the ranked
"predicted leaves".

Path relevance (reference ``chain_path_rel_fn``): path(child) = alpha * s + (1 - alpha) * path(parent) when
s > 0.09, else s itself (a low score is not smoothed: it prunes the subtree). The root's path is 1. ``s`` is the raw
slate score in the released code ("code") and the calibrated latent score in the paper ("paper", sec. 2.2).

Excluded documents mask their leaves, and an internal node whose documents are all excluded is masked too (the
reference code meant to, but never does). Masked nodes are never shown, reached or ranked.
"""

from __future__ import annotations

import numpy as np

from garen_infer.index.tree.semantic_tree import SemanticTree


class SearchTree:
    def __init__(self, tree: SemanticTree, excluded_rows: set[int], alpha: float, gate: float, mode: str):
        self.tree, self.alpha, self.gate, self.mode = tree, alpha, gate, mode
        n = len(tree)
        self.local = np.zeros(n)
        self.calibrated = np.zeros(n)
        self.path = np.zeros(n)
        self.reached = np.zeros(n, dtype=bool)
        self.expanded = np.zeros(n, dtype=bool)
        self.failures = np.zeros(n, dtype=np.int32)
        self.masked = self._mask(excluded_rows)
        self.local[0] = self.calibrated[0] = self.path[0] = 1.0
        self.reached[0] = True

    def _mask(self, excluded_rows: set[int]) -> np.ndarray:
        """A node is masked when every document beneath it is excluded: with pre-order numbering, the excluded
        documents beneath a node are a difference of two running counts."""
        tree = self.tree
        if not excluded_rows:
            return np.zeros(len(tree), dtype=bool)
        excluded = np.isin(tree.leaf_rows, np.fromiter(excluded_rows, dtype=np.int64))
        before = np.concatenate([[0], np.cumsum(excluded)])
        leaves = tree.leaves_before
        return before[leaves[tree.subtree_end]] - before[leaves[:-1]] == tree.leaf_count

    def chain(self, score: float, parent_path: float) -> float:
        return self.alpha * score + (1 - self.alpha) * parent_path if score > self.gate else score

    # ---- what the search reads ---------------------------------------------------------------------------
    def frontier(self, give_up_after: int) -> list[int]:
        """Reached, unexpanded, unmasked internal nodes by path relevance, best first (ties in depth-first order,
        as the reference's stable sort); a node whose slate failed ``give_up_after`` times is dropped."""
        open_ = self.reached & ~self.expanded & ~self.masked & (self.tree.row < 0) & (self.failures < give_up_after)
        nodes = np.flatnonzero(open_)
        return nodes[np.argsort(-self.path[nodes], kind="stable")].tolist()

    def best_at_depth(self, depth: int) -> int | None:
        """The reached node at ``depth`` with the highest path relevance (the internal slates' reference node)."""
        nodes = np.flatnonzero(self.reached & ~self.masked & (self.tree.depth == depth))
        return int(nodes[np.argmax(self.path[nodes])]) if len(nodes) else None

    def reached_leaves(self) -> np.ndarray:
        return np.flatnonzero(self.reached & (self.tree.row >= 0))

    def leaf_scores(self) -> list[tuple[int, float]]:
        """(leaf node, final score) best first: (1 - alpha) * path(parent) + alpha * calibrated(leaf), no gate."""
        leaves = self.reached_leaves()
        scores = (1 - self.alpha) * self.path[self.tree.parent[leaves]] + self.alpha * self.calibrated[leaves]
        order = np.argsort(-scores, kind="stable")
        return [(int(leaves[i]), float(scores[i])) for i in order]

    # ---- what the search writes --------------------------------------------------------------------------
    def expand(self, node: int, child_scores: dict[int, float]) -> None:
        """``node``'s slate was answered: its shown children are reached with their slate scores."""
        self.expanded[node] = True
        for child, score in child_scores.items():
            self.reached[child] = True
            self.local[child] = self.calibrated[child] = score
            self.path[child] = self.chain(score, self.path[node])

    def calibrate(self, latent: dict[int, float]) -> None:
        """The latest fit: every reached node but the root takes its latent score (0 if it was in no slate); in
        "paper" mode path relevance is then recomputed from the root down with the calibrated scores."""
        reached = np.flatnonzero(self.reached)[1:]  # node 0 (the root) is never in a slate
        self.calibrated[reached] = [latent.get(int(n), 0.0) for n in reached]
        if self.mode == "paper":
            for n in reached:  # pre-order: a parent's path is final before its children's
                self.path[n] = self.chain(self.calibrated[n], self.path[self.tree.parent[n]])
