"""Validation metrics of a pair scorer, per query over the query's whole mined candidate list.

- ``auc``: mean over queries (with a positive and a negative) of the ROC AUC of the scores: how often a gold item
  outscores a non-gold one of the same query, which is what the navigator's ranking of candidate groups needs.
- ``auc_pooled``: one AUC over all pairs (it also rewards calibration across queries).
- ``R@K``: recall of the gold items among the K best-scored of the query (K_g = 20 groups per navigator step,
  GAREN sec. 4.2), and ``nDCG@10`` of the scored order (the reranker's view), both by ir-measures.
- ``first_stage_nDCG@10`` / ``first_stage_R@K``: the same lists in first-stage order, where pairs carry their
  first-stage rank (document pairs; a pair without one, such as a gold document the first stage missed, comes
  last): the baseline a trained reranker must beat on the same queries.
"""

from __future__ import annotations

import numpy as np


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, scores))


def _ranking_measures(qrels: dict, run: dict, measures: list[str]) -> dict[str, float]:
    from garen_infer.evaluation.evaluate import measure_per_query

    per_query = measure_per_query(qrels, run, measures)
    return {name: float(np.mean(list(values.values()))) if values else 0.0 for name, values in per_query.items()}


def per_query_auc(queries: np.ndarray, labels: np.ndarray, scores: np.ndarray) -> dict[int, float]:
    """Query number -> ROC AUC of its scores, for every query with a positive and a negative pair."""
    out = {}
    for q in np.unique(queries):
        at = np.flatnonzero(queries == q)
        if 0 < labels[at].sum() < len(at):
            out[int(q)] = roc_auc(labels[at], scores[at])
    return out


def scorer_metrics(
    queries: np.ndarray, labels: np.ndarray, scores: np.ndarray, ranks: np.ndarray, recall_at: int = 20
) -> dict[str, float]:
    """Metrics of one validation pass; arrays are per pair (query number, 0/1 label, score, first-stage rank or -1)."""
    out: dict[str, float] = {"pairs": float(len(labels)), "positive_rate": float(labels.mean()) if len(labels) else 0.0}
    if len(set(labels.tolist())) == 2:
        out["auc_pooled"] = roc_auc(labels, scores)
    aucs = list(per_query_auc(queries, labels, scores).values())
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    first_stage: dict[str, dict[str, float]] = {}
    for q in np.unique(queries):
        at = np.flatnonzero(queries == q)
        qid = str(int(q))
        if labels[at].sum() == 0:
            continue
        qrels[qid] = {str(i): int(labels[i]) for i in at}
        run[qid] = {str(i): float(scores[i]) for i in at}
        if (ranks[at] >= 0).any():
            unranked = float(ranks[at].max() + 1)
            first_stage[qid] = {str(i): -float(ranks[i] if ranks[i] >= 0 else unranked) for i in at}
    if aucs:
        out["auc"] = float(np.mean(aucs))
    measures = [f"R@{recall_at}", "nDCG@10"]
    if qrels:
        out.update(_ranking_measures(qrels, run, measures))
        out["queries_with_gold"] = float(len(qrels))
    if first_stage and len(first_stage) == len(qrels):
        out.update({f"first_stage_{k}": v for k, v in _ranking_measures(qrels, first_stage, measures).items()})
    return out
