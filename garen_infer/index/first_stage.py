"""The first-stage ranking every method starts from: BM25 (default, as in GAREN sec. 5) or dense.

BRIGHT's evaluation (Su et al., "BRIGHT: A Realistic and Challenging Benchmark for Reasoning-Intensive
Retrieval", ICLR 2025, arXiv 2407.12883; its run.py) drops each query's excluded ids from the scores before it
keeps the top 1000; so does this first stage when given the rows to exclude, so excluded documents never fill
a window, spend budget or steer a vote. Output is still filtered once more in ``evaluate.remove_excluded``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from garen_infer.errors import GarenError
from garen_infer.settings import Count

if TYPE_CHECKING:
    from garen_infer.index.open_index import OpenIndex


REWRITE = "rewrite"  # first_stage.query


@dataclass(frozen=True)
class FirstStageConfig:
    kind: Literal["bm25", "dense"] = "bm25"  # BM25 (GAREN sec. 5), or a dense inner product over `vectors`
    # a dense first stage's vectors: the graph's ("embeddings"), or its own ("first_stage_embeddings", e.g.
    #   ReasonIR-8B with its instructions beside a Qwen3-Embedding graph: configs/garen-paper-reasonir.yaml)
    vectors: Literal["embeddings", "first_stage_embeddings"] = "embeddings"
    depth: Count = 1000  # BRIGHT keeps the top 1000
    # the text it searches with: "original" (the query); a published rewrite, bright:<model> (BRIGHT's
    #   reasoning queries: GAREN Table 4 uses gpt4's) or jsonl:<queries.jsonl>[#<field>]
    #   (data/query_texts.py); or "rewrite": the generator role writes one per query (query_rewrite.py),
    #   cached and counted as role query_writer
    query: str = "original"
    # the text every model after the first stage reads (reranker, navigator, planner, agent): "original"
    #   (GAREN App. B.1: the GPT-4 queries "strengthen the initial pool"), or "rewritten" (the first stage's)
    models_read: Literal["original", "rewritten"] = "original"

    @property
    def index_stage(self) -> str:
        """The index stage it ranks from."""
        return self.vectors if self.kind == "dense" else "bm25"


def first_stage(index: OpenIndex, query_texts: list[str], config: FirstStageConfig,
                exclude: list[set[int]] | None = None) -> list[list[int]]:
    """Corpus rows per query, best first: the top ``depth`` once each query's ``exclude`` rows are dropped."""
    return [[row for row, _ in hits] for hits in first_stage_scored(index, query_texts, config, exclude)]


def first_stage_scored(index: OpenIndex, query_texts: list[str], config: FirstStageConfig,
                       exclude: list[set[int]] | None = None) -> list[list[tuple[int, float]]]:
    """``first_stage`` with each row's score: BM25's (bm25s), or the dense inner product of query and
    document."""
    depth = config.depth + max((len(e) for e in exclude), default=0) if exclude else config.depth
    if config.kind == "bm25":
        found = index.bm25.search(query_texts, depth)
        ranked = [[(row, float(score)) for row, score in hits] for hits in found]
    elif config.kind == "dense":
        from garen_infer.index.knn_graph import flat_ip_index

        vectors = np.ascontiguousarray(index.vectors(config.vectors), dtype=np.float32)
        queries = index.encoder(config.vectors).encode_queries(query_texts)
        sims, ids = flat_ip_index(vectors).search(queries, min(depth, len(vectors)))
        ranked = [[(int(i), float(s)) for i, s in zip(row, row_sims) if i >= 0]
                  for row, row_sims in zip(ids, sims)]
    else:
        raise GarenError(f"unknown first stage '{config.kind}' (bm25 or dense)")
    if not exclude:
        return ranked
    return [[(r, s) for r, s in hits if r not in drop][: config.depth] for hits, drop in zip(ranked, exclude)]


def first_stage_texts(queries, config: FirstStageConfig, dataset_name: str) -> list[str]:
    """The text the first stage searches with for each query: its own, or its rewrite (every query needs one)."""
    if config.query == "original":
        return [q.text for q in queries]
    from garen_infer.data.query_texts import rewritten_queries

    rewrites = rewritten_queries(config.query, dataset_name)
    missing = [q.id for q in queries if q.id not in rewrites]
    if missing:
        raise GarenError(f"first_stage.query '{config.query}' has no text for {len(missing)} of {len(queries)} queries "
                         f"(first: '{missing[0]}')")
    return [rewrites[q.id] for q in queries]


def excluded_rows(query, doc_index: dict[str, int]) -> set[int]:
    """The corpus rows of a query's excluded ids (ids absent from the corpus are ignored)."""
    return {doc_index[d] for d in query.excluded_ids if d in doc_index}


def all_scores(index: OpenIndex, kind: str, query_text: str, vectors: str = "embeddings") -> np.ndarray:
    """The first stage's score of every document for one query (BM25, or the dense inner product)."""
    if kind == "bm25":
        return index.bm25.scores(query_text)
    if kind == "dense":
        query = index.encoder(vectors).query_vectors([query_text])[0]
        return np.asarray(index.vectors(vectors), dtype=np.float32) @ query
    raise GarenError(f"unknown first stage '{kind}' (bm25 or dense)")
