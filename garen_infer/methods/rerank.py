"""Retrieve-and-rerank: a sliding-window listwise reranker over the first-stage top-k, k = the budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from garen_infer.methods.base import Method, QueryState, Search
from garen_infer.methods.window import STRIDE, WINDOW, sliding_window
from garen_infer.settings import AtLeast, AtMost, Count


@dataclass
class RerankConfig:
    budget: Count = 100  # documents reranked (GAREN sec. 5)
    window: Count = WINDOW  # documents per listwise call (RankGPT's sliding window, GAREN sec. 5)
    stride: Annotated[int, AtLeast(1), AtMost("window")] = STRIDE  # positions it moves up per call (RankGPT)


class RetrieveAndRerank(Method):
    name, Config, roles = "rerank", RerankConfig, ("reranker",)
    scored_by = "reranker"  # a pointwise reranker's P(yes) (or the embedder's cosine) in run.trec

    def search(self, state: QueryState) -> Search:
        pool = list(state.first_stage[: state.budget])
        return (yield from sliding_window(pool, self.config.window, self.config.stride))


METHOD = RetrieveAndRerank
