"""BM25 alone: the first-stage ranking, no model."""

from __future__ import annotations

from dataclasses import dataclass

from garen_infer.methods.base import Method, QueryState, Search
from garen_infer.settings import Count


@dataclass
class Bm25Config:
    depth: Count = 1000  # BRIGHT keeps the top 1000


class Bm25Method(Method):
    name, Config = "bm25", Bm25Config
    scored_by = "first_stage"  # run.trec carries the BM25 (or dense inner-product) scores it ranked by

    def search(self, state: QueryState) -> Search:
        return state.first_stage[: self.config.depth]
        yield  # a generator that asks for nothing


METHOD = Bm25Method
