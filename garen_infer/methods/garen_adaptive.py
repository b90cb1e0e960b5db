"""What GAREN learns about its navigator within one query, from the reranker's judgments it already paid for.

Evidence of a document. Each reranked window orders its documents; a document's evidence is the reciprocal of
its position in the latest window that held it, e(d) = 1 / pos (1 = first). Only the top of a reranked window
says much: below its few relevant documents a reranker orders the rest by noise, so the evidence falls off as
fast as reciprocal rank. A document kept for the next window is reranked again: its evidence follows the
reranker's latest view.

Evidence of a group. E(g) = max of e(d) over its reranked members: a group is as promising as its best member,
the rule by which the navigator's training labels a group positive (it holds a relevant document).

Navigator reliability. rho_t = Spearman's rank correlation, over the groups that have both a navigator score
and a reranked member, between the navigator's scores and E(g); None below MIN_GROUPS such groups. A rank
correlation because GAREN reads only the order of the navigator's scores (it sorts groups by them) and the
scores of navigators differ in scale (a cosine, a P(yes), an edge count); a calibration curve would need a
scale.

The trace also records q_t, the navigator's percentile of the groups holding the reranker's top documents
(weights e(d)): most groups hold no relevant document and the reranker orders those by noise, which pulls
rho_t down even for an accurate navigator, and q_t looks only where the reranker is sure. (Read by the rule in
place of rho_t, as r_t = max(0, 2 q_t - 1), it did worse on SciFact's train queries: docs/design/garen.md.)

The adaptive rule (``switch_rule: adaptive``), with T the top TOP documents of the latest reranked window:

    r_t      = the navigator's reliability, shrunk while the evidence is thin (adaptive_reliability):
               rho:  max(0, rho_t) m_t / (m_t + M0)                   (m_t groups behind rho_t)
               auc:  max(0, 2 A_t - 1) n_t / (n_t + AUC_N0)           (A_t below; n_t pairs behind it)
               lead: max(0, 2 a_t - 1) w_t / (w_t + LEAD_N0)          (a_t below; w_t windows)
    beta_t   = (1 - l0) (1 - r_t)^k                    how much the reranker's evidence may move a group
                                                       (l0: adaptive_prior_min, 0.5; k: adaptive_power, 1)
    score(g) = P(g) + beta_t * H(g)
      P(g)   = the percentile of g's navigator score among the groups scored so far for the query (in [0, 1])
      H(g)   = sum over d in T of e(d) * (1[g is a group of d] + |N_k(d) in g| / k)
               (a group holding, or neighbouring, the documents the reranker put on top: the cluster
               hypothesis)
    order    = adaptive_merge: interleave-2 (the default): one group of the navigator's own order, then two of
               score(g)'s order, and again, each group at its first place; interleave: one and one;
               sum: score(g)'s order alone
    exploit at t  iff  t > tau_switch, or t > 1 and the best-ordered group holds a document of T

A_t, the top AUC: among the judged groups the navigator scored, the chance that a group holding a document
that reached the top TOP of some window outscores one whose judged members never did. Both sides were judged,
so both were mostly chosen by the navigator, which keeps the navigator's own choices from inflating it (q_t
and a_t, the navigator's mean percentile of the group of each window's top document, are near 0.95 for every
navigator for that reason). On Cranfield A_t separates an accurate navigator from MiniLM (medians 0.94 and
0.72); on SciFact, with about one gold document a query, it does not (0.65 and 0.66): the reranker's top is
mostly noise there.

Why the interleave: an accurate navigator loses when evidence around a noisy top pushes its best groups out of
the window, and within a query no reliability measure above tells it from a weak one when the top is noise.
Giving the navigator's own order every third place keeps its best groups in every window whatever r_t says
(measured: it cuts the loss of an accurate navigator, not to zero on SciFact; docs/design/garen.md); the
evidence keeps the other two places. No extra model call: e(d) comes from the reranking each iteration already
makes, P(g) from the
navigator's scores."""

from __future__ import annotations

import numpy as np

M0 = 5.0  # pseudo-count of the shrinkage: with 5 groups of evidence, half of rho_t is believed
MIN_GROUPS = 3  # fewer groups with both a score and a reranked member give no correlation worth recording
AUC_N0 = 5.0  # pseudo-count of the top AUC's shrinkage, in (top group, other judged group) pairs
LEAD_N0 = 1.0  # pseudo-count of the lead agreement's shrinkage, in reranked windows
TOP = 3  # the documents at the top of a reranked window whose groups and neighbours gain evidence


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's rho with average ranks for ties; None where either side is constant."""
    rx, ry = _ranks(np.asarray(x, dtype=float)), _ranks(np.asarray(y, dtype=float))
    sx, sy = rx.std(), ry.std()
    if sx == 0 or sy == 0:
        return None
    return float(((rx - rx.mean()) * (ry - ry.mean())).mean() / (sx * sy))


def _ranks(values: np.ndarray) -> np.ndarray:
    """0-based ranks, ties sharing their average rank (one sort, no loop over the distinct values)."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts  # the rank of the first of each distinct value
    return (first + (counts - 1) / 2.0)[inverse].astype(float)


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

    def __init__(self, doc_groups) -> None:
        self.doc_groups = doc_groups
        self.document: dict[int, float] = {}  # e(d)
        self.group: dict[int, float] = {}  # E(g)
        self.top: list[int] = []  # T: the top of the latest reranked window
        self.leads: list[int] = []  # the document at the top of each reranked window so far, window by window
        self.ever_top: set[int] = set()  # every document that reached the top TOP of a reranked window

    def observe(self, reranked: list[int]) -> None:
        for pos, d in enumerate(reranked):
            self.document[d] = 1.0 / (pos + 1)
        self.top = list(reranked[:TOP])
        if reranked:
            self.leads.append(reranked[0])
        self.ever_top.update(reranked[:TOP])
        self.group = {}
        for d, e in self.document.items():
            for g in self.doc_groups[d]:
                self.group[g] = max(self.group.get(g, 0.0), e)

    def reliability(self, navigator_scores: dict[int, float]) -> dict:
        """rho_t and the number of groups m_t behind it (rho None when m_t < MIN_GROUPS or a side is constant), and
        q_t, the navigator's percentile of the groups holding the reranker's top (None when none was scored)."""
        both = [g for g in navigator_scores if g in self.group]
        rho = (
            spearman([navigator_scores[g] for g in both], [self.group[g] for g in both])
            if len(both) >= MIN_GROUPS
            else None
        )
        prior = percentiles(navigator_scores)
        weights = [(self.document[d], prior[g]) for d in self.top for g in self.doc_groups[d] if g in prior]
        top = sum(w * p for w, p in weights) / sum(w for w, _ in weights) if weights else None
        leads = [p for p in (self.lead_percentile(d, prior) for d in self.leads) if p is not None]
        auc, pairs = self.top_auc(navigator_scores)
        return {"rho": None if rho is None else round(rho, 4), "groups": len(both),
                "top_percentile": None if top is None else round(top, 4), "auc": auc, "auc_pairs": pairs,
                "lead": round(float(np.mean(leads)), 4) if leads else None, "windows": len(leads)}

    def top_auc(self, navigator_scores: dict[int, float]) -> tuple[float | None, int]:
        """Among the judged groups the navigator scored, the probability that a group holding a document
        that reached a window's top TOP outscores one whose judged members never did (ties count half), and
        the number of such pairs; both sides were judged, so both were mostly chosen by the navigator."""
        judged = [g for g in self.group if g in navigator_scores]
        tops = {g for d in self.ever_top for g in self.doc_groups[d]}
        pos = np.asarray([navigator_scores[g] for g in judged if g in tops])
        neg = np.asarray([navigator_scores[g] for g in judged if g not in tops])
        if not len(pos) or not len(neg):
            return None, 0
        wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
        return round(float(wins) / (len(pos) * len(neg)), 4), len(pos) * len(neg)

    def lead_percentile(self, d: int, prior: dict[int, float]) -> float | None:
        """The navigator's percentile of the best-scored group of d (None when no group of d was scored)."""
        known = [prior[g] for g in self.doc_groups[d] if g in prior]
        return max(known) if known else None

    def top_evidence(self, graph) -> dict[int, float]:
        """H(g) of the module docstring, for every group holding or neighbouring a document of T."""
        bonus: dict[int, float] = {}
        for d in self.top:
            e, neighbours = self.document[d], graph.of(d)
            for g in self.doc_groups[d]:
                bonus[g] = bonus.get(g, 0.0) + e
            for n in neighbours:
                for g in self.doc_groups[n]:
                    bonus[g] = bonus.get(g, 0.0) + e / max(len(neighbours), 1)
        return bonus

    def holds_top(self, g: int) -> bool:
        return any(g in self.doc_groups[d] for d in self.top)


def shrunk_reliability(reliability: dict, measure: str = "rho") -> float:
    """r_t of the module docstring: from rho_t (``rho``) or from the lead agreement a_t (``lead``)."""
    if measure == "auc":
        auc, n = reliability["auc"], reliability["auc_pairs"]
        return 0.0 if auc is None else max(0.0, 2.0 * auc - 1.0) * n / (n + AUC_N0)
    if measure == "lead":
        lead, n = reliability["lead"], reliability["windows"]
        return 0.0 if lead is None else max(0.0, 2.0 * lead - 1.0) * n / (n + LEAD_N0)
    rho, m = reliability["rho"], reliability["groups"]
    return 0.0 if rho is None else max(0.0, rho) * m / (m + M0)


def adaptive_scores(groups: list[int], navigator_scores: dict[int, float], bonus: dict[int, float],
                    beta: float) -> dict[int, float]:
    """score(g) of the module docstring for each of ``groups`` (all of them navigator-scored)."""
    prior = percentiles(navigator_scores)
    return {g: prior[g] + beta * bonus.get(g, 0.0) for g in groups}


def interleave(first: list[int], second: list[int], per_first: int = 1) -> list[int]:
    """One group of ``first``, then ``per_first`` of ``second``, and again, each group at its earliest place
    (a group already placed is skipped, and its list's next one taken)."""
    out: dict[int, None] = {}
    queues = (iter(first), iter(second))
    pattern = [0] + [1] * per_first
    active = [True, True]
    while any(active):
        for side in pattern:
            for g in queues[side]:
                if g not in out:
                    out[g] = None
                    break
            else:
                active[side] = False
    return list(out)


def exploit_now(t: int, tau_switch: int, best_group: int | None, evidence: GroupEvidence) -> bool:
    """The adaptive switch: after tau_switch, or once the best-scored group holds one of the reranker's top."""
    return t > tau_switch or (t > 1 and best_group is not None and evidence.holds_top(best_group))


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
