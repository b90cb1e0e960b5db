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
    judged = [qid for qid, rels in dataset.qrels.items() if any(r > 0 for r in rels.values())]
    return measure_per_query({qid: dataset.qrels[qid] for qid in judged}, remove_excluded(run, dataset), measures)


def measure_per_query(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], measures) -> dict[str, dict[str, float]]:
    """measure -> {qid: value} over every query of ``qrels``; a query missing from the run scores 0."""
    import ir_measures

    parsed = [ir_measures.parse_measure(m) for m in measures]
    values = {str(m): {qid: 0.0 for qid in qrels} for m in parsed}
    for metric in ir_measures.iter_calc(parsed, qrels, {q: d for q, d in run.items() if q in qrels}):
        values[str(metric.measure)][metric.query_id] = float(metric.value)
    return values


def evaluate(run: dict[str, dict[str, float]], dataset: Dataset, measures=DEFAULT_MEASURES) -> dict:
    """Mean of each measure over ALL judged queries (a query missing from the run scores 0)."""
    values = per_query(run, dataset, measures)
    result = {name: (sum(v.values()) / len(v) if v else 0.0) for name, v in values.items()}
    result["queries"] = len(next(iter(values.values()), {}))
    return result
