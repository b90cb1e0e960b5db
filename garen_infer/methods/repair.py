"""REPAIR (Kim et al., "Adaptive Retrieval for Reasoning-Intensive Retrieval", ACL 2026, arXiv 2601.04618): a
planning step reranker (PSR) that writes its plan as numbered steps before ranking a window, and step-adaptive
neighbourhood retrieval (SAR) that expands through the corpus graph for the step that is pivotal yet
under-supported. docs/design/repair.md gives the sources and the deviations.

    kept = []; plan = none
    for window t = 1 .. T (T = 9 at budget 100):
        if t >= expand_from and plan:                      # SAR
            target = argmin over steps of support - alpha * contribution - beta * consistency   (repair_signals)
            candidates = the next first-stage documents + graph neighbours of kept, less kept
            newcomers = the candidates most similar to the target step
        else:
            newcomers = the next unseen first-stage documents
        window = kept + newcomers
        plan, order = PSR(query, window)                   # one call: [Reasoning Trace] Step 1..M, [Document Ranking]
        kept = order[:keep]
    return kept, then the documents each window left out (later windows first)

The step reranker must write text (its plan), so it is served by the ``generator`` role with the reasoning prompt
of GAREN App. G Table 10 (the prompt the GAREN paper ran REPAIR with); its calls and shown documents are counted
under ``reranker`` in the ledger, like every other method's reranker. Step similarities come from the index's
embedding model (``EncodeQuery`` per step, counted as ``step_encoder``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Annotated, Literal

import numpy as np

from garen_infer.index.first_stage import excluded_rows
from garen_infer.llm.permutation import parse_permutation
from garen_infer.llm.plan_steps import read_plan
from garen_infer.llm.problems import UNREADABLE
from garen_infer.llm.prompts import MAX_PASSAGE_WORDS, garen_reasoning
from garen_infer.llm.requests import EncodeQuery, Generate
from garen_infer.methods.base import Method, QueryState, Search
from garen_infer.methods.repair_signals import Verdicts, step_signals
from garen_infer.settings import AtLeast, Below, Count, NonNegative, NonNegativeFloat


@dataclass
class RepairConfig:
    budget: Count = 100  # Reranker@k: distinct documents shown to the step reranker (GAREN sec. 5: 100)
    window: Count = 20  # w (code: --window_size 20)
    keep: Annotated[int, AtLeast(1), Below("window")] = 10  # documents kept per window (code: window_size // 2)
    windows: NonNegative = 0  # T; 0 = by budget: 1 + (budget - w) / (w - keep), 9 at 100 (code: stops at iteration 9)
    expand_from: Count = 6  # SAR replaces the first-stage refill from this window on (code: iteration >= 6)
    verdict_windows: NonNegative = 5  # windows whose orders feed the consistency counts (code: bt_iter = 5)
    alpha: NonNegativeFloat = 1.0  # weight of contribution in s(t) (code's default; bash/rank_bright.sh sweeps 0-1)
    beta: NonNegativeFloat = 1.0  # weight of consistency in s(t) (code's default; swept 0-1 likewise)
    graph_k: Count = 16  # neighbours taken per kept document (code: get_neighbours k = 16 of a 32-NN graph)
    # "code": the next first-stage documents pad the candidates ahead of the graph neighbours, all then ordered by
    #   the target step (scripts/reranker.py); "graph": graph neighbours only (SAR as the paper's abstract frames it)
    candidates: Literal["code", "graph"] = "code"
    revisit: bool = True  # code: a neighbour shown in an earlier window may return (only the kept ones are removed)
    prompt_text: Literal["paper", "plain"] = "paper"  # GAREN App. G Table 10 as printed, or in the plain layout
    max_words: Count = MAX_PASSAGE_WORDS  # words per passage, as for every method here (code: 512 tokens)


@dataclass
class Progress:
    """One query's search so far."""

    excluded: set[int]  # BRIGHT's excluded ids, never taken from the graph (the first stage has dropped them)
    seen: set[int] = field(default_factory=set)  # every document shown: the budget spent
    window: list[int] = field(default_factory=list)  # the last window, as shown
    kept: list[int] = field(default_factory=list)  # its best, best first
    left_out: list[list[int]] = field(default_factory=list)  # what each window dropped, in window order
    plan: tuple[str, ...] = ()  # the last plan read (the code keeps it when an answer has none)
    verdicts: Verdicts = field(default_factory=Verdicts)
    plans: list[list[str]] = field(default_factory=list)  # every window's plan, for the trace
    expansions: list[dict] = field(default_factory=list)
    unreadable: Counter = field(default_factory=Counter)


class Repair(Method):
    name, Config, index_stages, roles = "repair", RepairConfig, ("embeddings", "knn_graph"), ("generator",)

    def window_count(self, budget: int) -> int:
        c = self.config
        return c.windows or 1 + max(0, -(-(budget - c.window) // (c.window - c.keep)))

    def search(self, state: QueryState) -> Search:
        c = self.config
        budget = state.budget if state.budget is not None else c.budget
        p = Progress(excluded_rows(state.query, self.dataset.doc_index) if self.dataset is not None else set())
        for t in range(1, self.window_count(budget) + 1):
            room = min(c.window - len(p.kept), budget - len(p.seen))
            fresh = [d for d in state.first_stage if d not in p.seen][:room]
            if t >= c.expand_from and p.kept and p.plan:
                newcomers = yield from self.expand(p, fresh, room, t)
            else:
                newcomers = fresh
            if not newcomers:
                break
            p.window = p.kept + newcomers
            p.seen.update(newcomers)
            order = yield from self.plan_and_rank(state, p)
            if t <= c.verdict_windows:
                p.verdicts.record(order[: c.keep], order)
            p.kept = order[: c.keep]
            p.left_out.append(order[c.keep:])

        state.trace.update(windows=len(p.plans), budget_used=len(p.seen), plans=p.plans, expansions=p.expansions,
                           unreadable=dict(p.unreadable))
        ranking = list(p.kept)
        for dropped in reversed(p.left_out):
            ranking += dropped
        return list(dict.fromkeys(ranking))  # a revisited document appears once, at its best place

    def plan_and_rank(self, state: QueryState, p: Progress) -> Search:
        """PSR: one call writes the plan and ranks the window."""
        docs = [self.dataset.documents[r].full_text for r in p.window]
        chat = garen_reasoning(state.query.text, docs, self.config.max_words, self.config.prompt_text)
        (text,) = yield Generate((chat,), role="reranker", documents=tuple(p.window))
        answer = read_plan(text)
        if not answer.has_ranking:
            p.unreadable["ranking"] += 1  # the window keeps its order (the permutation parser's identity)
            state.answer_problems.append(("reranker", UNREADABLE))  # the ledger's count, beside the trace's
        if not answer.steps:
            p.unreadable["plan"] += 1  # the ranking was usable: the trace counts the missing plan
        p.plans.append(list(answer.steps))
        p.plan = answer.steps or p.plan
        return [p.window[i] for i in parse_permutation(text, len(p.window))]

    def expand(self, p: Progress, fresh: list[int], room: int, t: int) -> Search:
        """SAR: the candidates most similar to the pivotal, under-supported step of the current plan."""
        c = self.config
        step_vectors = np.stack((yield tuple(EncodeQuery(s, role="step_encoder") for s in p.plan)))
        signals = step_signals(step_vectors @ self.vectors(p.window).T, p.window, p.kept, p.verdicts, c.alpha, c.beta)
        target = signals.target

        neighbours: list[int] = []
        for d in p.kept:
            neighbours += [n for n in self.index.knn_graph.of(d) if n not in p.excluded][: c.graph_k]
        skip = set(p.kept) if c.revisit else set(p.kept) | p.seen
        pool = [d for d in dict.fromkeys((fresh if c.candidates == "code" else []) + neighbours) if d not in skip]

        sims = self.vectors(pool) @ step_vectors[target] if pool else np.zeros(0)
        newcomers, cost = [], 0
        for d in (pool[i] for i in np.argsort(-sims, kind="stable")):
            if d not in p.seen:
                if cost == room:
                    continue  # an unseen document would overrun the budget; a revisited one costs none
                cost += 1
            newcomers.append(d)
            if len(newcomers) == c.window - len(p.kept):
                break
        source = Counter("revisited" if d in p.seen else "from_first_stage" if d in fresh else "from_graph"
                         for d in newcomers)
        p.expansions.append({"window": t, "target_step": target, "step": p.plan[target], **signals.as_trace(),
                             **{k: source[k] for k in ("from_graph", "from_first_stage", "revisited")}})
        return newcomers

    def vectors(self, rows: list[int]) -> np.ndarray:
        return np.asarray(self.index.embeddings[rows], dtype=np.float32)

    @staticmethod
    def summarize(records: list[dict]) -> dict:
        traces = [r["trace"] for r in records if "plans" in r.get("trace", {})]
        if not traces:
            return {}
        expansions = [e for t in traces for e in t["expansions"]]
        shown = sum(e["from_graph"] + e["from_first_stage"] + e["revisited"] for e in expansions)
        return {
            "repair_expansions_per_query": round(len(expansions) / len(traces), 3),
            "repair_graph_share": round(sum(e["from_graph"] for e in expansions) / shown, 4) if shown else 0.0,
            "repair_unreadable_rankings": sum(t["unreadable"].get("ranking", 0) for t in traces),
            "repair_unreadable_plans": sum(t["unreadable"].get("plan", 0) for t in traces),
        }


METHOD = Repair
