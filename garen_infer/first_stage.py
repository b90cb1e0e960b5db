"""The first-stage ranking every method starts from: BM25 (default, as in GAREN sec. 5) or dense."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from garen_infer.errors import GarenError
from garen_infer.settings import Count


@dataclass(frozen=True)
class FirstStageConfig:
    kind: Literal["bm25", "dense"] = "bm25"
    depth: Count = 1000  # BRIGHT keeps the top 1000


def first_stage(index, query_texts: list[str], config: FirstStageConfig) -> list[list[int]]:
    """Corpus rows per query, best first."""
    if config.kind == "bm25":
        return [[row for row, _ in hits] for hits in index.bm25.search(query_texts, config.depth)]
    if config.kind == "dense":
        from garen_infer.index.knn_graph import flat_ip_index

        vectors = np.ascontiguousarray(index.embeddings, dtype=np.float32)
        _, ids = flat_ip_index(vectors).search(index.embedder.encode_queries(query_texts), min(config.depth, len(vectors)))
        return [[int(i) for i in row if i >= 0] for row in ids]
    raise GarenError(f"unknown first stage '{config.kind}' (bm25 or dense)")
