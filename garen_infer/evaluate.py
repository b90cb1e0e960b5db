"""Evaluation through ir-measures, with BRIGHT's excluded ids removed here and only here."""

from __future__ import annotations

from garen_infer.data.dataset import Dataset
from garen_infer.errors import GarenError

DEFAULT_MEASURES = ("nDCG@10", "R@100")


def parse_measures(measures) -> list:
    """ir_measures' objects for measure strings (nDCG@10, R@100, AP(rel=2), RR@10, ...); a string it cannot read
    is one error naming it, before any run is read."""
    import ir_measures

    parsed = []
    for text in measures:
        try:
            parsed.append(ir_measures.parse_measure(str(text)))
        except (NameError, ValueError, SyntaxError, TypeError) as err:
            raise GarenError(f"measure '{text}' is not one ir_measures reads ({err}); write e.g. nDCG@10, R@100, AP, RR@10, "
                             f"P@5 or AP(rel=2), one measure per argument") from None
    return parsed


def measure_names(measures) -> tuple[str, ...]:
    """The canonical names of measure strings (``nDCG(cutoff=10)`` is ``nDCG@10``): the keys of every result."""
    return tuple(dict.fromkeys(str(m) for m in parse_measures(measures)))


def judged_query_ids(dataset: Dataset) -> list[str]:
    """Queries with at least one relevant document: the ones every mean here is taken over."""
    return [qid for qid, rels in dataset.qrels.items() if any(r > 0 for r in rels.values())]


def remove_excluded(run: dict[str, dict[str, float]], dataset: Dataset) -> dict[str, dict[str, float]]:
    """Drop each query's excluded ids (BRIGHT run.py does this before scoring). The one place it happens."""
    excluded = {q.id: q.excluded_ids for q in dataset.queries if q.excluded_ids}
    return {qid: {d: s for d, s in docs.items() if d not in excluded.get(qid, ())} for qid, docs in run.items()}


def per_query(run: dict[str, dict[str, float]], dataset: Dataset, measures=DEFAULT_MEASURES) -> dict[str, dict[str, float]]:
    """measure -> {qid: value} over ALL judged queries; a query missing from the run scores 0 (pytrec_eval would
    silently drop it from the denominator)."""
    judged = judged_query_ids(dataset)
    return measure_per_query({qid: dataset.qrels[qid] for qid in judged}, remove_excluded(run, dataset), measures)


def measure_per_query(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], measures) -> dict[str, dict[str, float]]:
    """measure -> {qid: value} over every query of ``qrels``; a query missing from the run scores 0."""
    import ir_measures

    parsed = parse_measures(measures)
    values = {str(m): {qid: 0.0 for qid in qrels} for m in parsed}
    for metric in ir_measures.iter_calc(parsed, qrels, {q: d for q, d in run.items() if q in qrels}):
        values[str(metric.measure)][metric.query_id] = float(metric.value)
    return values


def evaluate(run: dict[str, dict[str, float]], dataset: Dataset, measures=DEFAULT_MEASURES, judged_in_run: bool = False) -> dict:
    """Mean of each measure over ALL judged queries (a query missing from the run scores 0), or with
    ``judged_in_run`` over the judged queries the run holds (trec_eval's default)."""
    if judged_in_run:
        present = set(run)
        dataset = Dataset(dataset.name, [], [q for q in dataset.queries if q.id in present],
                          {qid: rels for qid, rels in dataset.qrels.items() if qid in present})
    values = per_query(run, dataset, measures)
    result = {name: (sum(v.values()) / len(v) if v else 0.0) for name, v in values.items()}
    result["queries"] = len(next(iter(values.values()), {}))
    return result


def coverage(run: dict[str, dict[str, float]], dataset: Dataset) -> dict:
    """How many of the dataset's judged queries the run answers (holds at least one document for)."""
    judged = judged_query_ids(dataset)
    answered = [qid for qid in judged if run.get(qid)]
    return {"judged_queries": len(judged), "judged_queries_in_run": len(answered)}
