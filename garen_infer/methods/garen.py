"""GAREN: Group-Aware Adaptive Retrieval for Evidence Navigation (Park, Kwon, Kim, Lee; arXiv 2609.02188,
sec. 4).

Per query (Algorithm 1 with App. E):
    W_1 = R_0[:w]
    for t = 1..T:                      T = 1 + ceil((budget - w) / (w - h))  ->  9 iterations, 100 documents
        W~_t = Rerank(q, W_t)
        if t < T:                      (issued together with the reranking: both depend only on W_t)
            G_cand = { Omega(d') : d' in N_k(d), d in W_t }
            G_score = Navigate(q, G_cand)             at most K_g new groups, by vote; cache reused
            X_t = explore(G_score) if t <= tau_switch else exploit(G_score)     w - h documents
            W_{t+1} = W~_t[:h] + X_t
    final: group-driven evidence propagation over all observed documents (Eq. 8-9)

Overlapping groups (a learned soft partition, stage ``groups_soft``): a document may belong to several groups,
Omega(d) becomes a set, and every rule below reads all of a document's groups: candidates are the union over
the neighbours' groups, a group gets one vote per window document however many of that document's neighbours
it holds, the fill rule treats a document as covered when any of its groups is, expansion skips a document
another group already gave, and propagation sums the evidence of all of a document's groups. With disjoint
groups (Leiden, the default) each of these reduces to the paper's rule, step for step.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Literal

from garen_infer.llm.requests import Rerank, ScoreYesNo
from garen_infer.methods import garen_adaptive as adaptive
from garen_infer.methods.base import Method, QueryState, Search
from garen_infer.settings import AtLeast, Below, Count, NonNegative, NonNegativeFloat, Probability

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.index.folder import IndexFolder


NON_REASONING_RBP_P, REASONING_RBP_P = 0.6, 0.5  # App. A


@dataclass
class GarenConfig:
    budget: Count = 100  # documents reranked in total (sec. 5)
    window: Count = 20  # w (sec. 5)
    keep: Annotated[int, AtLeast(0), Below("window")] = 10  # h (sec. 5)
    k_groups: Count | None = 20  # K_g, new groups the navigator scores per iteration (sec. 5, App. D); None = no cap
    k_documents: Count | None = None  # the same cap for expansion_unit: document; none by default (sec. 6.2: "up to
    #   window size x #edges = 20 x 16 = 320 documents" per step)
    tau_switch: NonNegative = 4  # iteration that ends exploration (sec. 5, App. D)
    strategy: Literal["explore-then-exploit", "explore", "exploit"] = "explore-then-exploit"  # Table 3 ablations
    navigator: Literal["model", "connectivity", "best-member", "model+best-member"] = "model"  # connectivity: the
    #   no-model heuristic of sec. 6.4; best-member: no summary, a group scores max over its members d of cos(q, d)
    #   (index embeddings); model+best-member: the mean of the model's score and (1 + that cosine) / 2
    switch_rule: Literal["fixed", "adaptive", "adaptive-scores"] = "fixed"  # fixed: tau_switch and the
    #   navigator's scores (the paper). adaptive: groups in the navigator's order interleaved with that of
    #   score(g) = P(g) + beta_t H(g), beta_t = (1 - l0)(1 - r_t)^k, P the navigator's percentile, H the
    #   reciprocal-rank evidence of the reranked window's top 3 in or next to g; exploit after tau_switch or once
    #   the first group holds a top-3 document (methods/garen_adaptive.py); adaptive-scores: that order, fixed switch
    adaptive_merge: Literal["sum", "interleave", "interleave-2"] = "interleave-2"  # interleave-2: one group of
    #   the navigator's own order, then two of score(g)'s, and again (each group at its first place), so the
    #   navigator's best groups are tried whatever the evidence says; interleave: one and one; sum: score(g)'s
    #   order alone
    adaptive_reliability: Literal["rho", "auc", "lead"] = "rho"  # r_t: rho = max(0, rho_t) m_t / (m_t + 5),
    #   rho_t Spearman's rho of the navigator's scores against the best reranked rank of each group's members
    #   (m_t groups); auc = max(0, 2 A_t - 1) n / (n + 5), A_t the chance that a group holding a reranked top-3
    #   document outscores another judged group (n pairs); lead = max(0, 2 a_t - 1) w / (w + 1), a_t the
    #   navigator's mean percentile of the group of each of the w windows' top document
    adaptive_power: NonNegativeFloat = 1.0  # k in beta_t = (1 - l0)(1 - r_t)^k
    # l0: 1 - l0 is the evidence's weight while the navigator's reliability is unknown
    adaptive_prior_min: Probability = 0.5
    # document: the navigator scores neighbouring documents (sec. 6.2)
    expansion_unit: Literal["group", "document"] = "group"
    groups: str = "groups"  # index stage: groups | groups_kmeans | groups_random (App. C.2)
    propagation: bool = True  # group-driven evidence propagation (sec. 4.3)
    # RBP persistence p (App. A); None = by the reranker's prompt: 0.5 for garen-reasoning, else 0.6
    rbp_p: Probability | None = None
    alpha: NonNegativeFloat = 0.01  # propagation weight (App. A)
    propagation_top: Count = 10  # |R_final|: the top-10 that spread evidence (sec. 4.3)
    fill_from_first_stage: bool = True  # if the scored groups run dry, fill the window from R_0 (paper silent)


class Garen(Method):
    name, Config, roles = "garen", GarenConfig, ("reranker", "navigator")
    scored_by = "reranker"  # a pointwise reranker's scores in run.trec; pseudo-scores with a listwise one
    index_stages = ("bm25", "knn_graph", "groups")

    def __init__(self, config: GarenConfig, index: IndexFolder, dataset: Dataset):
        config = self.settle(config, {})  # built without the runner: the non-reasoning defaults
        super().__init__(config, index, dataset)
        self.graph = index.knn_graph
        if config.expansion_unit == "document":  # every document is its own "group", read in full
            self.doc_group = list(range(len(dataset.documents)))
            self.doc_groups = [(r,) for r in self.doc_group]
            self.members = [[r] for r in range(len(dataset.documents))]
            self.texts = [d.full_text for d in dataset.documents]
        else:
            groups = index.groups(config.groups)
            self.doc_group, self.members, self.texts = groups.doc_group, groups.members, groups.texts
            self.doc_groups = groups.doc_groups  # row -> all its groups (one, unless the groups overlap)

    @classmethod
    def stages_for(cls, config: GarenConfig) -> tuple[str, ...]:
        extra = ("embeddings",) if "best-member" in config.navigator else ()
        return ("bm25", "knn_graph", config.groups, *extra)

    @classmethod
    def roles_for(cls, config: GarenConfig) -> tuple[str, ...]:
        return cls.roles if config.navigator.startswith("model") else ("reranker",)

    @classmethod
    def settle(cls, config: GarenConfig, models: dict) -> GarenConfig:
        if config.rbp_p is None:  # App. A: p = 0.6 with the non-reasoning prompt, 0.5 with the reasoning one
            prompt = ((models or {}).get("reranker") or {}).get("prompt", "garen")
            config = replace(config, rbp_p=REASONING_RBP_P if prompt == "garen-reasoning" else NON_REASONING_RBP_P)
        return config

    def iterations(self, budget: int) -> int:
        """T = 1 + ceil((budget - w) / (w - h)): the last expansion may be partial."""
        c = self.config
        return 1 + max(0, -(-(budget - c.window) // (c.window - c.keep)))

    def notice(self, budget: int | None) -> str | None:
        """At a budget no larger than the window there is no second iteration: the first stage's top is reranked
        once, no group is scored or expanded, and the run is retrieve-and-rerank under GAREN's name."""
        c = self.config
        if budget is None or budget > c.window:
            return None
        paper = f"; 100, the paper's, is {self.iterations(100)}" if c.window < 100 else ""
        return (f"[run] garen at budget {budget}: no larger than its window ({c.window}), so it reranks the first "
                f"stage's top {budget} once and expands no group (retrieve-and-rerank); a budget above {c.window} "
                f"makes GAREN explore (every {c.window - c.keep} documents more is one more iteration{paper})")

    # ---- the search ---------------------------------------------------------------------------------------------
    def search(self, state: QueryState) -> Search:
        c = self.config
        assert state.budget is not None  # a reranking method: its run gives it a budget
        iterations = self.iterations(state.budget)
        window = list(state.first_stage[: min(c.window, state.budget)])
        observed = set(window)
        dropped: list[int] = []  # dropped: reranked documents that left the window, latest first
        scores: dict[int, float] = {}  # Pi_q: the navigator's score cache for this query
        trace = state.trace.setdefault("iterations", [])
        evidence = adaptive.GroupEvidence(self.doc_groups)  # the reranker's view of the groups, for reliability
        for t in range(1, iterations + 1):
            if not window:  # the first stage found nothing and no group was reachable
                reranked = []
                break
            if t == iterations:
                reranked = yield Rerank(tuple(window))
                break
            candidates, votes = self.candidate_groups(window)
            to_score = self.groups_to_score(candidates, votes, scores, state.first_stage, observed)
            if c.navigator == "connectivity":
                reranked = yield Rerank(tuple(window))
                scores = self.connectivity(window, candidates)
            elif c.navigator == "best-member":
                reranked = yield Rerank(tuple(window))
                scores.update(zip(to_score, self.best_member(state, to_score)))
            else:
                navigate = ScoreYesNo(tuple(self.texts[g] for g in to_score),
                                      rows=tuple(tuple(self.members[g]) for g in to_score))
                reranked, new_scores = yield (Rerank(tuple(window)), navigate)
                if c.navigator == "model+best-member":
                    best = self.best_member(state, to_score)
                    new_scores = [(s + (1.0 + b) / 2.0) / 2.0 for s, b in zip(new_scores, best)]
                scores.update(zip(to_score, new_scores))
            evidence.observe(reranked)
            reliability = evidence.reliability(scores)
            eligible = [g for g in dict.fromkeys([*candidates, *to_score]) if g in scores]
            explore = c.strategy == "explore" or (c.strategy == "explore-then-exploit" and t <= c.tau_switch)
            if c.switch_rule == "fixed":
                ranked_groups = sorted(eligible, key=lambda g: -scores[g])  # stable: ties keep candidate order
            else:
                ranked_groups, explore = self.adaptive_order(t, eligible, scores, evidence, reliability, explore)
            room = min(c.window - c.keep, state.budget - len(observed))
            sources: list[int] = []  # the group each expanded document came from
            expansion = self.expand(ranked_groups, observed, state, room, explore, sources)
            filled = []
            if c.fill_from_first_stage and len(expansion) < room:
                filled = [d for d in state.first_stage if d not in observed and d not in expansion][
                    : room - len(expansion)
                ]
            observed.update(expansion + filled)
            dropped = reranked[c.keep :] + dropped  # later windows' losers first, each in reranked order
            trace.append({"t": t, "scored": to_score, "selected": list(dict.fromkeys(sources)),
                          "expanded": len(expansion),
                          "explore": explore, "filled_from_first_stage": len(filled),
                          "navigator_reliability": reliability})
            window = reranked[: c.keep] + expansion + filled
        evidence.observe(list(reranked))
        state.trace["navigator_reliability"] = evidence.reliability(scores)  # the query's figure, all evidence in
        ranking = list(reranked) + [d for d in dropped if d not in reranked]
        state.trace["scored_groups"] = sorted({g for step in trace for g in step["scored"]} | set(scores))
        state.trace["selected_groups"] = sorted({g for step in trace for g in step["selected"]})
        return self.propagate(ranking) if c.propagation else ranking

    def adaptive_order(self, t, eligible, scores, evidence, reliability, explore):
        """The groups in the order of the adaptive score, and whether to explore (garen_adaptive.py)."""
        c = self.config
        r = adaptive.shrunk_reliability(reliability, c.adaptive_reliability)
        beta = (1.0 - c.adaptive_prior_min) * (1.0 - r) ** c.adaptive_power
        mixed = adaptive.adaptive_scores(eligible, scores, evidence.top_evidence(self.graph), beta)
        ranked_groups = sorted(eligible, key=lambda g: -mixed[g])  # stable: ties keep candidate order
        if c.adaptive_merge != "sum":  # the navigator's own order keeps every other (every third) place
            per_first = 2 if c.adaptive_merge == "interleave-2" else 1
            navigator_order = sorted(eligible, key=lambda g: -scores[g])
            ranked_groups = adaptive.interleave(navigator_order, ranked_groups, per_first)
        if c.switch_rule == "adaptive" and c.strategy == "explore-then-exploit":
            explore = not adaptive.exploit_now(t, c.tau_switch, ranked_groups[0] if ranked_groups else None, evidence)
        return ranked_groups, explore

    def best_member(self, state: QueryState, groups: list[int]) -> list[float]:
        """The summary-free navigator: max over a group's members of cos(query, member), from the index's
        embeddings (the query is encoded once per query by the index's embedder)."""
        if "_query_vector" not in state.__dict__:
            state.__dict__["_query_vector"] = self.index.embedder.query_vectors([state.query.text])[0]
        vectors, query = self.index.embeddings, state.__dict__["_query_vector"]
        return [float(max(vectors[list(self.members[g])] @ query)) for g in groups]

    # ---- diagnostics, after the query finished (never seen by the search) -------------------------------------
    def diagnose(self, state: QueryState, gold_rows: set[int]) -> None:
        from garen_infer.methods.garen_diagnostics import GarenDiagnostics

        if "_diagnostics" not in self.__dict__:
            self._diagnostics = GarenDiagnostics(self)
        state.trace["gold"] = self._diagnostics.diagnose(state, gold_rows)

    @staticmethod
    def summarize(records: list[dict]) -> dict:
        from garen_infer.methods.garen_diagnostics import summarize

        return {**summarize(records), **adaptive.summarize_reliability(records)}

    # ---- App. E: candidates, votes, budget allocation -----------------------------------------------------------
    def candidate_groups(self, window: list[int]) -> tuple[list[int], dict[int, int]]:
        """Groups of the window's k-NN neighbours, in first-seen order, and each group's vote (Eq. 11): the
        number of window documents whose neighbourhood intersects the group."""
        votes: dict[int, int] = {}
        for d in window:
            for g in dict.fromkeys(g for n in self.graph.of(d) for g in self.doc_groups[n]):
                votes[g] = votes.get(g, 0) + 1
        return list(votes), votes

    def groups_to_score(self, candidates, votes, scores, first_stage, observed) -> list[int]:
        """At most K_g unscored groups: the highest votes; when fewer are available, the groups of the
        top-ranked first-stage documents whose group is not yet covered fill the budget (a document of several
        groups is covered when any of them is; if none is, its primary group is added)."""
        k = self.config.k_documents if self.config.expansion_unit == "document" else self.config.k_groups
        unscored = [g for g in candidates if g not in scores]
        if k is None:
            return unscored
        if len(unscored) > k:
            return sorted(unscored, key=lambda g: -votes[g])[:k]  # stable: ties keep first-seen order
        chosen = list(unscored)
        covered = set(scores) | set(chosen)
        for d in first_stage:
            if len(chosen) >= k:
                break
            g = self.doc_group[d]
            if d not in observed and covered.isdisjoint(self.doc_groups[d]):
                chosen.append(g)
                covered.add(g)
        return chosen

    def connectivity(self, window: list[int], candidates: list[int]) -> dict[int, float]:
        """Sec. 6.4's heuristic navigator: a group's score is the number of k-NN edges from the window into it."""
        edges: dict[int, float] = {g: 0.0 for g in candidates}
        for d in window:
            for n in self.graph.of(d):
                for g in self.doc_groups[n]:
                    edges[g] = edges.get(g, 0.0) + 1.0
        return edges

    # ---- sec. 4.2.2: explore (round robin) or exploit (depth first) -------------------------------------------
    def expand(self, ranked_groups: list[int], observed: set, state: QueryState, room: int, explore: bool,
               sources: list | None = None) -> list[int]:
        """Up to ``room`` unobserved documents from the ranked groups; ``sources`` receives each one's group."""
        rank = state.first_stage_rank

        def order(d):  # App. E: by first-stage rank; past the first stage's depth, by its score (then row)
            return (rank[d], 0.0, d) if d in rank else (len(rank), -self.first_stage_score(state, d), d)

        queues: deque[tuple[int, deque[int]]] = deque()
        for g in ranked_groups:
            docs = sorted((d for d in self.members[g] if d not in observed), key=order)
            if docs:
                queues.append((g, deque(docs)))
        picked: list[int] = []
        taken: set[int] = set()
        while queues and len(picked) < room:
            g, queue = queues[0]
            while queue and queue[0] in taken:  # overlapping groups: another group already gave this document
                queue.popleft()
            if queue:
                picked.append(queue.popleft())
                taken.add(picked[-1])
                if sources is not None:
                    sources.append(g)
            if not queue:
                queues.popleft()
            elif explore:  # one document from each group in score order, then around again
                queues.rotate(-1)
            # exploit: exhaust the best group before moving to the next
        return picked

    def first_stage_score(self, state: QueryState, row: int) -> float:
        """The first stage's score of a document it ranked below its depth (computed once per query)."""
        if state.first_stage_kind is None:
            return 0.0  # a state built by hand: ties, so the corpus row decides
        if "_first_stage_scores" not in state.__dict__:
            from garen_infer.index.first_stage import all_scores

            text = state.first_stage_text or state.query.text  # its own text ranks past its depth
            scores = all_scores(self.index, state.first_stage_kind, text, state.first_stage_vectors)
            state.__dict__["_first_stage_scores"] = scores
        return float(state.__dict__["_first_stage_scores"][row])

    # ---- sec. 4.3: group-driven evidence propagation ------------------------------------------------------------
    def propagation_scores(self, ranking: list[int]) -> dict[int, float]:
        """score(d) = b(d) + alpha * sum of b(d') over d' in d's group (Eq. 9; the sum includes d itself, as the
        equation is written), with RBP weights b(d) = (1-p) p^(rank-1) for the top 10 and 0 otherwise (Eq. 8).
        Overlapping groups: the sum runs over each of d's groups (a d' sharing two groups with d counts twice)."""
        c = self.config
        base = {d: (1 - c.rbp_p) * c.rbp_p ** i for i, d in enumerate(ranking[: c.propagation_top])}
        group_mass: dict[int, float] = {}
        for d, b in base.items():
            for g in self.doc_groups[d]:
                group_mass[g] = group_mass.get(g, 0.0) + b
        return {
            d: base.get(d, 0.0) + c.alpha * sum(group_mass.get(g, 0.0) for g in self.doc_groups[d])
            for d in ranking
        }

    def propagate(self, ranking: list[int]) -> list[int]:
        """All observed documents sorted by propagated score; ties keep the pre-propagation order."""
        score = self.propagation_scores(ranking)
        return sorted(ranking, key=lambda d: -score[d])


METHOD = Garen
