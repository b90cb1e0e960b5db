"""What GAREN learns about its navigator within one query, from the reranker's judgments it already paid for.

Evidence of a document. Each reranked window orders its documents; a document's evidence is its position in the
latest window that held it, e(d) = 1 - pos / (n - 1) (1 = first of n, 0 = last). A document kept for the next
window is reranked again, so its evidence follows the reranker's latest view.

Evidence of a group. E(g) = max of e(d) over its reranked members: a group is as promising as its best member,
the rule by which the navigator's training labels a group positive (it holds a relevant document).

Navigator reliability. rho_t = Spearman's rank correlation, over the groups that have both a navigator score and
a reranked member, between the navigator's scores and E(g); None below MIN_GROUPS such groups. A rank correlation
because GAREN reads only the order of the navigator's scores (it sorts groups by them) and the scores of
navigators differ in scale (a cosine, a P(yes), an edge count); a calibration curve would need a scale.

The adaptive rule (``switch_rule: adaptive``), with m_t the number of groups behind rho_t:

    r_t      = max(0, rho_t) * m_t / (m_t + M0)                  the reliability, shrunk while the evidence is thin
    lambda_t = l0 + (1 - l0) * r_t                                how far the navigator's prior is trusted (l0:
                                                                  adaptive_prior_min, 0.25)
    score(g) = lambda_t * P(g) + (1 - lambda_t) * V(g)
      P(g)   = the percentile of g's navigator score among the groups scored so far for the query
      V(g)   = E(g) if a member of g has been reranked, else the percentile of C(g), the reranker-weighted edges
               C(g) = sum over window documents d of e(d) * |N_k(d) in g|   (the cluster hypothesis: the neighbours
               of documents the reranker put on top are the likeliest relevant)
    exploit at t  iff  t > 1 and E(g*) >= CONFIRMED for g* = argmax score(g)   (a member of the best group reached
               the top of its window: evidence has accumulated; else keep exploring)

No extra model call: e(d) comes from the reranking each iteration already makes, P(g) from the navigator's scores.
"""

from __future__ import annotations

import numpy as np

MIN_GROUPS = 3  # fewer groups with both a score and a reranked member give no correlation worth recording
M0 = 5.0  # pseudo-count of the shrinkage: with 5 groups of evidence, half of rho_t is believed
CONFIRMED = 0.75  # E(g) at or above this: a member of g was in the top quarter of its window


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's rho with average ranks for ties; None where either side is constant."""
    rx, ry = _ranks(np.asarray(x, dtype=float)), _ranks(np.asarray(y, dtype=float))
    sx, sy = rx.std(), ry.std()
    if sx == 0 or sy == 0:
        return None
    return float(((rx - rx.mean()) * (ry - ry.mean())).mean() / (sx * sy))


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values), dtype=float)
    for v in np.unique(values):  # ties share their average rank
        tied = values == v
        ranks[tied] = ranks[tied].mean()
    return ranks


def percentiles(scores: dict[int, float]) -> dict[int, float]:
    """Each key's score as its rank among the scores, in [0, 1] (1 = highest; ties share their average rank)."""
    if not scores:
        return {}
    keys = list(scores)
    ranks = _ranks(np.asarray([scores[k] for k in keys]))
    top = max(len(keys) - 1, 1)
    return {k: float(r) / top for k, r in zip(keys, ranks)}


class GroupEvidence:
    """e(d) and E(g) of one query, updated after each reranking."""

    def __init__(self, doc_groups):
        self.doc_groups = doc_groups
        self.document: dict[int, float] = {}  # e(d)
        self.group: dict[int, float] = {}  # E(g)

    def observe(self, reranked: list[int]) -> None:
        last = max(len(reranked) - 1, 1)
        for pos, d in enumerate(reranked):
            self.document[d] = 1.0 - pos / last
        self.group = {}
        for d, e in self.document.items():
            for g in self.doc_groups[d]:
                self.group[g] = max(self.group.get(g, 0.0), e)

    def reliability(self, navigator_scores: dict[int, float]) -> dict:
        """rho_t and the number of groups m_t behind it (rho None when m_t < MIN_GROUPS or a side is constant)."""
        both = [g for g in navigator_scores if g in self.group]
        rho = spearman([navigator_scores[g] for g in both], [self.group[g] for g in both]) if len(both) >= MIN_GROUPS else None
        return {"rho": None if rho is None else round(rho, 4), "groups": len(both)}

    def weighted_edges(self, window: list[int], graph) -> dict[int, float]:
        """C(g): the k-NN edges from the window into g, each weighted by its source's evidence e(d)."""
        edges: dict[int, float] = {}
        for d in window:
            weight = self.document.get(d, 0.0)
            for n in graph.of(d):
                for g in self.doc_groups[n]:
                    edges[g] = edges.get(g, 0.0) + weight
        return edges


def shrunk_reliability(reliability: dict) -> float:
    """r_t of the module docstring: lambda_t = l0 + (1 - l0) r_t."""
    rho, m = reliability["rho"], reliability["groups"]
    return 0.0 if rho is None else max(0.0, rho) * m / (m + M0)


def adaptive_scores(groups: list[int], navigator_scores: dict[int, float], evidence: GroupEvidence,
                    edges: dict[int, float], weight: float) -> dict[int, float]:
    """score(g) of the module docstring for each of ``groups`` (all of them navigator-scored)."""
    prior = percentiles({g: navigator_scores[g] for g in navigator_scores})
    unexplored = percentiles({g: edges.get(g, 0.0) for g in groups if g not in evidence.group})
    return {g: weight * prior[g] + (1.0 - weight) * evidence.group.get(g, unexplored.get(g, 0.0)) for g in groups}


def exploit_now(t: int, best_group: int | None, evidence: GroupEvidence) -> bool:
    """The adaptive switch: exploit once a member of the best-scored group reached the top of its window."""
    return t > 1 and best_group is not None and evidence.group.get(best_group, 0.0) >= CONFIRMED


def summarize_reliability(records: list[dict]) -> dict:
    """metrics.json's view: each query's final rho (null where too few groups had evidence) and their mean."""
    per_query = {r["qid"]: r["trace"]["navigator_reliability"]["rho"] for r in records
                 if "navigator_reliability" in r.get("trace", {})}
    if not per_query:
        return {}
    known = [rho for rho in per_query.values() if rho is not None]
    return {"navigator_reliability": {"measure": "Spearman rho, navigator score vs best reranked member (E(g))",
                                      "mean": round(float(np.mean(known)), 4) if known else None,
                                      "queries_measured": len(known), "per_query": per_query}}
