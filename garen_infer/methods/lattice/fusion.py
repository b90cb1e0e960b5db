"""LATTICE++ (Gupta et al., 2025, App. B.5): LATTICE fused with a lexical and a dense retriever.

    s(d) = 0.6 * norm(LATTICE)(d) + 0.2 * norm(BM25)(d) + 0.2 * norm(dense)(d)

Each system's scores for the query are min-max normalised to [0, 1] over the documents it returns (LATTICE: the
leaves it reached; BM25 and dense: their top ``fusion_depth``); a document a system does not return gets 0 from
it. The dense retriever is the index's embedding model (the paper used BGE-Reasoner-Embed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from garen_infer.index.first_stage import all_scores, excluded_rows
from garen_infer.methods.base import QueryState, Search
from garen_infer.methods.lattice.method import Lattice, LatticeConfig
from garen_infer.settings import Count, NonNegativeFloat

if TYPE_CHECKING:
    pass


@dataclass
class LatticeFusionConfig(LatticeConfig):
    weight_lattice: NonNegativeFloat = 0.6  # App. B.5
    weight_bm25: NonNegativeFloat = 0.2  # App. B.5
    weight_dense: NonNegativeFloat = 0.2  # App. B.5 (BGE-Reasoner-Embed there)
    fusion_depth: Count = 1000  # documents BM25 and dense each contribute (BRIGHT's runs keep 1000)


def min_max(scored: list[tuple[int, float]]) -> dict[int, float]:
    """Scores mapped onto [0, 1]; a system whose scores are all equal gives each of its documents 1."""
    if not scored:
        return {}
    values = np.array([s for _, s in scored], dtype=np.float64)
    low, span = values.min(), values.max() - values.min()
    return {row: float((s - low) / span) if span > 0 else 1.0 for row, s in scored}


def fuse(systems: list[list[tuple[int, float]]], weights: list[float]) -> list[tuple[int, float]]:
    """Weighted sum of min-max normalised scores, best first (ties: first seen, in system order)."""
    fused: dict[int, float] = {}
    for scored, weight in zip(systems, weights):
        for row, value in min_max(scored).items():
            fused[row] = fused.get(row, 0.0) + weight * value
    return sorted(fused.items(), key=lambda item: -item[1])


class LatticePlusPlus(Lattice):
    name, Config = "lattice++", LatticeFusionConfig

    @classmethod
    def stages_for(cls, config: LatticeConfig) -> tuple[str, ...]:
        return (config.tree, "bm25", "embeddings")

    def search(self, state: QueryState) -> Search:
        c = self.config
        lattice = yield from self.traverse(state)
        bm25 = self.index.bm25.search([state.query.text], c.fusion_depth)[0]
        fused = fuse([lattice, bm25, self.dense(state.query.text)], [c.weight_lattice, c.weight_bm25, c.weight_dense])
        excluded = excluded_rows(state.query, self.doc_row)
        return [row for row, _ in fused if row not in excluded]

    def dense(self, text: str) -> list[tuple[int, float]]:
        """The index's embedding model as a retriever: the top ``fusion_depth`` rows by cosine."""
        similarity = all_scores(self.index, "dense", text)
        k = min(self.config.fusion_depth, len(similarity))
        top = np.argpartition(-similarity, k - 1)[:k]
        top = top[np.lexsort((top, -similarity[top]))]  # best first, ties by row
        return [(int(r), float(similarity[r])) for r in top]


METHOD = LatticePlusPlus
