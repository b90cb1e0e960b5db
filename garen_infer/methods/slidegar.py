"""SlideGAR (Rathee, MacAvaney, Anand, "Guiding Retrieval using LLM-based Listwise Rankers", ECIR 2025, arXiv
2501.09186) as its official code behaves.

Two pools, the initial ranking R0 and a graph frontier F, taken in turn (R0 on even iterations, F on odd ones,
skipping an empty pool). The first window is w documents of R0; each later window is the b best of the last
window plus b new documents. After each listwise call the b best stay, the rest are PREPENDED to the selected
list, and the frontier is rebuilt from scratch: neighbours of the b best, in rank order, stopping at b documents.
With budget c = 100, w = 20, b = 10 it makes 9 calls over 100 distinct documents, like retrieve-and-rerank.

``variant: rgs-author`` is SlideGAR as the RGS author re-implemented it for BRIGHT (run_retrieval.py; RGS,
arXiv 2509.07163), the baseline of the RGS paper: a k-NN graph with k = the DiskANN degree for the corpus size
(8 / 12 / 16 / 32), the first window the first w first-stage documents, then each window the w/2 best of the
last one plus w/2 new documents taken in turn from the graph frontier (the unseen neighbours of the whole
ranked window, best first) and from the unseen initial list; budget 20 for the first window, +10 per window
after.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from garen_infer.errors import GarenError
from garen_infer.index.proximity_graph import degree_for
from garen_infer.llm.requests import Rerank
from garen_infer.methods.base import Method, QueryState, Search
from garen_infer.settings import AtLeast, AtMost, Count

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.index.folder import IndexFolder


@dataclass
class SlideGarConfig:
    budget: Count = 100  # c, documents the reranker sees
    window: Count = 20  # w (buffer_size)
    # b (step_size): documents kept and documents added per iteration
    step: Annotated[int, AtLeast(1), AtMost("window")] = 10
    # The official code appends unscored R0 documents after the scored ones (True). Off by default so R@100 is
    # recall over the documents the reranker observed, as GAREN sec. 5 defines it for every method.
    backfill: bool = False
    variant: str = "official"  # "official" (llmgar's slide_gar.py) | "rgs-author" (the RGS author's re-implementation)
    # neighbours per document from the k-NN graph; 0 = all (official) / the DiskANN degree (rgs-author)
    graph_k: int = 0


VARIANTS = ("official", "rgs-author")


class SlideGar(Method):
    name, Config, index_stages, roles = "slidegar", SlideGarConfig, ("knn_graph",), ("reranker",)
    scored_by = "reranker"  # a pointwise reranker's scores in run.trec; pseudo-scores with a listwise one

    def __init__(self, config: SlideGarConfig, index: IndexFolder, dataset: Dataset):
        super().__init__(config, index, dataset)
        if config.variant not in VARIANTS:
            raise GarenError(f"slidegar: variant must be one of {', '.join(VARIANTS)}, not '{config.variant}'")

    def neighbours(self, row: int) -> list[int]:
        k = self.config.graph_k
        if not k and self.config.variant == "rgs-author":
            k = degree_for(len(self.index.knn_graph.neighbours))
        found = self.index.knn_graph.of(row)
        return found[:k] if k else found

    def search(self, state: QueryState) -> Search:
        if self.config.variant == "rgs-author":
            return (yield from self.rgs_author_search(state))
        return (yield from self.official_search(state))

    def rgs_author_search(self, state: QueryState) -> Search:
        """The RGS author's loop: windows alternate between frontier and initial-list newcomers."""
        budget, w = state.budget, self.config.window
        assert budget is not None  # a reranking method: its run gives it a budget
        half = w // 2
        initial = list(state.first_stage)
        window, next_initial = initial[: min(w, budget)], min(w, budget)
        losers: list[int] = []  # documents that left a window, later ones first
        spent, iteration = 0, 0
        ranked: list[int] = []
        while window:
            ranked = yield Rerank(tuple(window))
            spent += len(window) if iteration == 0 else len(window) - half
            if spent >= budget:
                break
            seen = set(ranked) | set(losers)
            frontier: list[int] = []
            for d in ranked:  # every document of the ranked window, best first, adds unseen neighbours
                for n in self.neighbours(d):
                    if n not in seen and n not in frontier:
                        frontier.append(n)
                        if len(frontier) >= half:
                            break
            kept, losers = ranked[:half], ranked[half:] + losers
            if iteration % 2 == 0:
                window = kept + frontier[:half]
            else:
                window = list(kept)
                while next_initial < len(initial) and len(window) < w:
                    d = initial[next_initial]
                    next_initial += 1
                    if d not in seen and d not in window:
                        window.append(d)
            window = window[: len(kept) + budget - spent]
            if len(window) == len(kept):
                break  # nothing new to rank
            iteration += 1
        state.trace["iterations"] = iteration + 1
        # the author's code outputs its top 10; every observed document is kept here, the last window first
        ranking = list(dict.fromkeys([*ranked, *losers]))
        if self.config.backfill:
            observed = set(ranking)
            ranking += [d for d in initial if d not in observed]
        return ranking

    def official_search(self, state: QueryState) -> Search:
        c, w, b = state.budget, self.config.window, self.config.step
        assert c is not None  # a reranking method: its run gives it a budget
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
                for n in self.neighbours(d):
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
