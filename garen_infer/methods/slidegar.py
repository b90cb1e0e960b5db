"""SlideGAR (Rathee, MacAvaney, Anand; ECIR 2025) as its official code behaves (anchors.md sec. 5.2).

Two pools, the initial ranking R0 and a graph frontier F, taken in turn (R0 on even iterations, F on odd ones,
skipping an empty pool). The first window is w documents of R0; each later window is the b best of the last
window plus b new documents. After each listwise call the b best stay, the rest are PREPENDED to the selected
list, and the frontier is rebuilt from scratch: neighbours of the b best, in rank order, stopping at b documents.
With budget c = 100, w = 20, b = 10 it makes 9 calls over 100 distinct documents, like retrieve-and-rerank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from garen_infer.llm.requests import Rerank
from garen_infer.methods.base import Method, QueryState, Search
from garen_infer.settings import AtLeast, AtMost, Count


@dataclass
class SlideGarConfig:
    budget: Count = 100  # c, documents the reranker sees
    window: Count = 20  # w (buffer_size)
    step: Annotated[int, AtLeast(1), AtMost("window")] = 10  # b (step_size): documents kept and documents added per iteration
    # The official code appends unscored R0 documents after the scored ones (True). Off by default so R@100 is
    # recall over the documents the reranker observed, as GAREN sec. 5 defines it for every method.
    backfill: bool = False


class SlideGar(Method):
    name, Config, index_stages, roles = "slidegar", SlideGarConfig, ("bm25", "knn_graph"), ("reranker",)

    def search(self, state: QueryState) -> Search:
        c, w, b = state.budget, self.config.window, self.config.step
        graph = self.index.knn_graph
        initial = list(state.first_stage)  # R0 in rank order; scored documents are skipped when taken
        frontier: dict[int, float] = {}  # F: document -> pseudo score of its best source
        scored: set[int] = set()
        selected: list[int] = []  # losers of earlier windows, later losers first
        top_b: list[int] = []
        iteration = 0

        def take(pool: str, size: int) -> list[int]:
            if pool == "R0":
                batch = [d for d in initial if d not in scored][:size]
            else:
                batch = sorted((d for d in frontier if d not in scored), key=lambda d: -frontier[d])[:size]
            for d in batch:
                frontier.pop(d, None)
            return batch

        while len(scored) < c:
            size = min(w if iteration == 0 else b, c - len(scored))
            pools = ("R0", "F") if iteration % 2 == 0 else ("F", "R0")
            batch = take(pools[0], size) or take(pools[1], size)
            if not batch:
                break  # both pools exhausted before the budget
            scored.update(batch)
            ranked = yield Rerank(tuple(top_b + batch))
            top_b, losers = ranked[:b], ranked[b:]
            selected = losers + selected
            pseudo = {d: 1.0 / (rank + 1) for rank, d in enumerate(ranked)}
            frontier = {}
            for d in top_b:  # rebuilt from scratch, capped at b documents
                for n in graph.of(d):
                    if n in scored:
                        continue
                    frontier[n] = max(frontier.get(n, 0.0), pseudo[d])
                    if len(frontier) >= b:
                        break
                if len(frontier) >= b:
                    break
            iteration += 1
        state.trace["iterations"] = iteration
        ranking = top_b + selected
        if self.config.backfill:
            ranking += [d for d in initial if d not in scored]
        return ranking


METHOD = SlideGar
