"""RGS, Reranker-Guided Search (Xu & Chen, "Beyond Sequential Reranking: Reranker-Guided Search Improves
Reasoning Intensive Retrieval", ICLR 2026, arXiv 2509.07163): a best-first search on the DiskANN proximity
graph in which the listwise reranker decides where to go next.

    A = seeds, reranked back to front; truncate A to L
    while the budget is not spent and A holds an unexpanded document:
        v = the first unexpanded document of A; mark v expanded
        V = v's out-neighbours never sent to the reranker, cut to the remaining budget
        append V to A; rerank windows (w, step w/2) from the end of A toward the front
        truncate A to L
    return A (best first)

Budget (Reranker@k) = distinct documents sent to the reranker: the seeds plus every inserted neighbour. Windows
that re-rank documents already seen cost model calls (the ledger counts them) but no budget.

Paper and author code (run_retrieval.py) differ in three places; ``follow`` picks one behaviour for all,
the code's by default, and ``seeds`` / ``early_stop`` / ``revisit`` override each on its own:
- seeds: the paper starts from the single document nearest to the query; the code from the first budget/5
  documents of the first stage, inserted (and reranked) as one batch;
- early stop: the code stops the back-to-front pass at the first window that holds none of the documents just
  inserted; the paper's pass always runs to the front of A;
- neighbour filter: the paper appends the out-neighbours "not already in A", so a document cut off by truncation
  may come back (at no budget: it was reranked before); the code drops every document ever reranked.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from garen_infer.errors import GarenError
from garen_infer.index.first_stage import excluded_rows
from garen_infer.llm.requests import EncodeQuery, Rerank
from garen_infer.methods.base import Method, QueryState, Search
from garen_infer.methods.window import STRIDE, WINDOW, window_bounds
from garen_infer.settings import AtLeast, AtMost, Count, NonNegative

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.index.folder import IndexFolder


FOLLOW = ("code", "paper")
FIRST_STAGES = ("graph", "run")
EXCLUDED = ("drop", "keep")


def list_length_for(budget: int) -> int:
    """L by budget, as the author ran it: 20 for Reranker@100/200, 30 for @300, 50 for @500 (larger: 50)."""
    if budget <= 200:
        return 20
    if budget <= 300:
        return 30
    return 50


@dataclass
class RgsConfig:
    budget: Count = 100  # Reranker@k: distinct documents sent to the reranker (RGS paper: k = 100 / 300 / 500)
    # "code": the author's run_retrieval.py; "paper": Algorithm 1 as the paper states it
    follow: Literal["code", "paper"] = "code"
    seeds: NonNegative = 0  # 0 = by `follow`: budget // 5 (code: 20 / 60 / 100 for k = 100 / 300 / 500) or 1 (paper)
    early_stop: bool | None = None  # None = by `follow`: True (code: stop at the first window with no new doc) / False
    revisit: bool | None = None  # None = by `follow`: False (code: never re-insert a reranked document) / True (paper:
    #   only neighbours already in A are dropped)
    list_length: NonNegative = 0  # L; 0 = by budget (code and paper: 20 / 30 / 50 for k = 100 / 300 / 500)
    window: Count = WINDOW  # w = 20 (paper sec. 4 setup; code)
    stride: Annotated[int, AtLeast(1), AtMost("window")] = STRIDE  # w / 2 = 10 (paper: step w/2; code)
    # "graph": greedy search on the proximity graph (code); "run": the run's BM25/dense
    first_stage: Literal["graph", "run"] = "graph"
    search_list: Count = 5000  # DiskANN search list for the "graph" first stage (code: search_L = 5000)
    depth: Count = 1000  # documents in the output ranking at most (as the run's first stage keeps; BRIGHT: 1000)
    # BRIGHT's excluded ids: "drop" them from the first stage (BRIGHT's run.py, every other
    excluded: Literal["drop", "keep"] = "drop"
    #   method here) or "keep" them, as the author's run_retrieval.py does (evaluation removes them either way)
    backfill: bool = False  # append unseen first-stage documents after the observed ones. Off by default so
    #   R@100 is recall over the documents the reranker observed (GAREN sec. 5). The observed documents always
    #   follow A in the order they were cut from it (a harness choice; the author's code outputs A's top 10 only).


class ReRankerGuidedSearch(Method):
    name, Config, index_stages, roles = "rgs", RgsConfig, ("embeddings", "proximity_graph"), ("reranker",)
    scored_by = "reranker"  # a pointwise reranker's scores in run.trec; pseudo-scores with a listwise one

    def __init__(self, config: RgsConfig, index: IndexFolder, dataset: Dataset):
        super().__init__(config, index, dataset)
        if config.follow not in FOLLOW:
            raise GarenError(f"rgs: follow must be one of {', '.join(FOLLOW)}, not '{config.follow}'")
        if config.first_stage not in FIRST_STAGES:
            raise GarenError(f"rgs: first_stage must be one of {', '.join(FIRST_STAGES)}, not '{config.first_stage}'")
        if not 0 < config.stride <= config.window:
            raise GarenError(f"rgs: stride must be in 1..window ({config.window}), not {config.stride}")
        if config.excluded not in EXCLUDED:
            raise GarenError(f"rgs: excluded must be one of {', '.join(EXCLUDED)}, not '{config.excluded}'")
        self.keeps_excluded = config.excluded == "keep"

    # ---- the switches, resolved -----------------------------------------------------------------------------
    def seed_count(self, budget: int) -> int:
        if self.config.seeds:
            return self.config.seeds
        return max(1, budget // 5) if self.config.follow == "code" else 1

    def stops_early(self) -> bool:
        if self.config.early_stop is not None:
            return self.config.early_stop
        return self.config.follow == "code"

    def revisits(self) -> bool:
        if self.config.revisit is not None:
            return self.config.revisit
        return self.config.follow == "paper"

    def list_length(self, budget: int) -> int:
        return self.config.list_length or list_length_for(budget)

    # ---- the search -----------------------------------------------------------------------------------------
    def initial_list(self, state: QueryState, budget: int) -> Search:
        """The list the seeds come from: the run's first stage, or a greedy search of the proximity graph from the
        query's embedding. That encoding is the method's own model work, so it is asked of the runner, which times
        it in the query's ledger (and batches it with the other queries in flight)."""
        if self.config.first_stage == "run":
            return list(state.first_stage)
        vector = yield EncodeQuery(state.query.text)
        keep_all = self.keeps_excluded or self.dataset is None
        drop = set() if keep_all else excluded_rows(state.query, self.dataset.doc_index)
        keep = min(self.config.search_list, max(self.config.depth, self.seed_count(budget)) + len(drop))
        found = self.index.proximity_graph.search(vector, keep, self.config.search_list)[0]  # top `keep` of a 5000-list
        return [r for r in found if r not in drop]

    def neighbours(self, row: int) -> list[int]:
        return self.index.proximity_graph.of(row)

    def search(self, state: QueryState) -> Search:
        budget = state.budget if state.budget is not None else self.config.budget
        initial = yield from self.initial_list(state, budget)
        limit, early_stop = self.list_length(budget), self.stops_early()
        seen: set[int] = set()  # every document sent (or committed) to the reranker: the budget spent
        expanded: set[int] = set()  # U
        dropped: list[list[int]] = []  # what each truncation cut off, in the order of the cuts
        stats = {"expansions": 0, "windows": 0, "early_stops": 0}

        seeds = list(dict.fromkeys(initial))[: min(self.seed_count(budget), budget)]
        A: list[int] = []
        yield from self._insert(A, seeds, seen, early_stop=False, stats=stats)  # seeds: one full pass (code)
        self._truncate(A, limit, dropped)

        while len(seen) < budget:
            v = next((d for d in A if d not in expanded), None)
            if v is None:
                break  # every document in A is expanded: the search has converged
            expanded.add(v)
            stats["expansions"] += 1
            new = self.neighbours_to_insert(v, A, seen, budget)
            if new:
                yield from self._insert(A, new, seen, early_stop, stats)
                self._truncate(A, limit, dropped)

        state.trace.update(stats, seeds=len(seeds), budget_used=len(seen), list_length=limit,
                           stop="budget" if len(seen) >= budget else "converged")
        ranking = list(A)
        for batch in dropped:  # observed documents cut from A, in the order they were cut
            ranking += batch
        ranking = list(dict.fromkeys(ranking))  # a document cut, re-inserted and cut again (paper) appears once
        if self.config.backfill:
            ranking += [d for d in initial if d not in seen][: max(0, self.config.depth - len(ranking))]
        return ranking

    def neighbours_to_insert(self, v: int, A: list[int], seen: set[int], budget: int) -> list[int]:
        """v's out-neighbours not in A (paper) or never reranked (code), cut where the documents never reranked
        would overrun the budget (re-inserting a reranked document costs none)."""
        in_list = set(A)
        candidates = [n for n in dict.fromkeys(self.neighbours(v)) if n not in (in_list if self.revisits() else seen)]
        room, out = budget - len(seen), []
        for n in candidates:
            if n not in seen:
                if room == 0:
                    break
                room -= 1
            out.append(n)
        return out

    def _insert(self, A: list[int], new: list[int], seen: set[int], early_stop: bool,
                stats: dict) -> Generator[Any, Any, None]:
        """Append ``new`` to A and rerank windows from the end toward the front; with ``early_stop`` the pass ends
        at the first window holding none of ``new`` (every new document has been reranked by then)."""
        A.extend(new)
        seen.update(new)
        fresh = set(new)
        for lo, hi in window_bounds(len(A), self.config.window, self.config.stride):
            if early_stop and fresh.isdisjoint(A[lo:hi]):
                stats["early_stops"] += 1
                break
            if hi - lo < 2:
                continue  # a single document has no order to ask for (the paper's lone seed)
            window = tuple(A[lo:hi])
            order = yield Rerank(window)
            if sorted(order) != sorted(window):
                raise GarenError(f"rgs: the reranker answered {list(order)} for the window {list(window)}: "
                                 "not a permutation")
            A[lo:hi] = order
            stats["windows"] += 1

    @staticmethod
    def _truncate(A: list[int], limit: int, dropped: list[list[int]]) -> None:
        if len(A) > limit:
            dropped.append(A[limit:])
            del A[limit:]


METHOD = ReRankerGuidedSearch
