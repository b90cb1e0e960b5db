"""Evaluation through ir-measures, with BRIGHT's excluded ids removed here and only here."""

from __future__ import annotations

from garen_infer.data.dataset import Dataset

DEFAULT_MEASURES = ("nDCG@10", "R@100")


def remove_excluded(run: dict[str, dict[str, float]], dataset: Dataset) -> dict[str, dict[str, float]]:
    """Drop each query's excluded ids (BRIGHT run.py does this before scoring). The one place it happens."""
    excluded = {q.id: q.excluded_ids for q in dataset.queries if q.excluded_ids}
    return {qid: {d: s for d, s in docs.items() if d not in excluded.get(qid, ())} for qid, docs in run.items()}


def per_query(run: dict[str, dict[str, float]], dataset: Dataset, measures=DEFAULT_MEASURES) -> dict[str, dict[str, float]]:
    """measure -> {qid: value} over ALL judged queries; a query missing from the run scores 0 (pytrec_eval would
    silently drop it from the denominator)."""
    import ir_measures

    parsed = [ir_measures.parse_measure(m) for m in measures]
    run = remove_excluded(run, dataset)
    judged = [qid for qid, rels in dataset.qrels.items() if any(r > 0 for r in rels.values())]
    values = {str(m): {qid: 0.0 for qid in judged} for m in parsed}
    qrels = {qid: dataset.qrels[qid] for qid in judged}
    for metric in ir_measures.iter_calc(parsed, qrels, {q: d for q, d in run.items() if q in qrels}):
        values[str(metric.measure)][metric.query_id] = float(metric.value)
    return values


def evaluate(run: dict[str, dict[str, float]], dataset: Dataset, measures=DEFAULT_MEASURES) -> dict:
    """Mean of each measure over ALL judged queries (a query missing from the run scores 0)."""
    values = per_query(run, dataset, measures)
    result = {name: (sum(v.values()) / len(v) if v else 0.0) for name, v in values.items()}
    result["queries"] = len(next(iter(values.values()), {}))
    return result
