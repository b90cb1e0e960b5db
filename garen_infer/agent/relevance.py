"""The embedder's three jobs in RARG, each at its own resolution:

- ``rank_corpus``: document-level relevance for ``embed_recall`` (sec. 3.2): the corpus by cosine to the scope
  query, best first, cut to the scope size;
- ``entry_paragraphs``: RARG+'s entry points (sec. 3.3): the top-X scope documents cut into 400-1000 character
  paragraphs, scored against the scope query, the best k kept;
- ``rerank_matches``: RARG++'s match-level relevance (sec. 3.4): up to M matches scored against a query built from
  the scope query and the rg pattern's keywords, the best m kept.

Ties keep the earlier item first (document row, paragraph order, scope order), so results are reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from garen_infer.agent.excerpts import excerpt_text, focus_keywords, split_paragraphs

if TYPE_CHECKING:
    from garen_infer.llm.embedded_corpus import EmbeddedCorpus


@dataclass(frozen=True)
class Paragraph:
    row: int
    text: str
    score: float


class Relevance:
    def __init__(self, index: EmbeddedCorpus, doc_texts: list[str], match_embedder=None):
        self.index, self.doc_texts = index, doc_texts
        self.match_embedder = match_embedder  # None = the index's own embedder
        self._paragraph_vectors: dict[int, tuple[list[str], np.ndarray]] = {}  # by row: documents recur across queries

    def rank_corpus(self, query: str, size: int) -> list[int]:
        vector = self.index.embedder.query_vectors([query])[0]
        scores = np.asarray(self.index.embeddings @ vector, dtype=np.float64)
        return top_rows(scores, size)

    def entry_paragraphs(
        self, query: str, rows: list[int], keep: int, min_chars: int, max_chars: int
    ) -> list[Paragraph]:
        vector = self.index.embedder.query_vectors([query])[0]
        candidates: list[tuple[int, str]] = []
        blocks = []
        for row in rows:
            if row not in self._paragraph_vectors:
                texts = split_paragraphs(self.doc_texts[row], min_chars, max_chars)
                vectors = (
                    self.index.embedder.encode_documents(texts, show_progress=False)
                    if texts
                    else np.zeros((0, len(vector)), np.float32)
                )
                self._paragraph_vectors[row] = (texts, vectors)
            texts, vectors = self._paragraph_vectors[row]
            candidates += [(row, t) for t in texts]
            blocks.append(vectors)
        if not candidates:
            return []
        scores = np.concatenate(blocks) @ vector
        return [Paragraph(candidates[i][0], candidates[i][1], float(scores[i])) for i in top_rows(scores, keep)]

    def rerank_matches(self, units: list[str], query_text: str, keep: int, max_chars: int) -> list[int]:
        """Positions of the best ``keep`` of ``units`` for ``query_text`` (an already constructed query). Each match
        is scored on its text as the agent would see it (at most ``max_chars``), without its file and line prefix."""
        embedder = self.match_embedder or self.index.embedder
        vectors = embedder.encode_documents([excerpt_text(u)[:max_chars] for u in units], show_progress=False)
        query = embedder.encode_documents([query_text], show_progress=False)[0]  # built with its own instruction
        return top_rows(vectors @ query, keep)


def constructed_query(instruction: str, scope_query: str, patterns: list[str]) -> str:
    """RARG++'s constructed query (sec. 3.4): the instruction, the scope query, the rg pattern's keywords."""
    return f"Instruct: {instruction}\nQuery: {scope_query}\nRG focus: {' '.join(focus_keywords(patterns))}"


def top_rows(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` highest scores, best first; ties by index."""
    scores = np.asarray(scores)
    n = len(scores)
    k = min(k, n)
    if k <= 0:
        return []
    if k < n:
        cut = np.partition(-scores, k - 1)[k - 1]  # the k-th best (negated): take every index at least as good
        candidates = np.flatnonzero(-scores <= cut)
    else:
        candidates = np.arange(n)
    order = np.lexsort((candidates, -scores[candidates]))
    return [int(i) for i in candidates[order][:k]]
