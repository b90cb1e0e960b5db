"""Evaluation through ir-measures, with BRIGHT's excluded ids removed here and only here."""

from __future__ import annotations

from garen_infer.data.dataset import Dataset
from garen_infer.errors import GarenError

DEFAULT_MEASURES = ("nDCG@10", "R@100")


def parse_measures(measures) -> list:
    """ir_measures' objects for measure strings: ir_measures' names (nDCG@10, R@100, AP(rel=2), RR@10, ...) or
    trec_eval's (ndcg_cut_10, map, recall_100, P_5, ndcg_cut.10,20, ...). Every string neither reads is named in one
    error, before any run is read."""
    parsed, bad = [], []
    for text in map(str, measures):
        found = _parse_measure(text)
        parsed.extend(found) if found else bad.append(text)
        _refuse_cutoffs(text, found)
    if bad:
        many = len(bad) > 1
        raise GarenError(
            f"measure{'s' if many else ''} {', '.join(repr(b) for b in bad)}: not {'names' if many else 'a name'} "
            "ir_measures or trec_eval reads; write e.g. nDCG@10, R@100, AP, RR@10, P@5 or "
            "AP(rel=2) (ir_measures), or ndcg_cut_10, recall_100, map (trec_eval), one measure "
            "per argument"
        )
    return parsed


def _refuse_cutoffs(text: str, found: list) -> None:
    """A cutoff is a whole number of ranks, at least 1: nDCG@0 would score every run 0 without a word."""
    for measure in found:
        cutoff = measure.params.get("cutoff")
        if cutoff is not None and (isinstance(cutoff, bool) or cutoff != int(cutoff) or cutoff < 1):
            raise GarenError(f"measure {text!r}: cutoff {cutoff} is not a whole number of ranks >= 1; write e.g. "
                             f"nDCG@10 (the top 10) or ndcg_cut_10")


def _parse_measure(text: str) -> list:
    """The measures a string names in ir_measures' syntax, else in trec_eval's (which may name several); [] if
    neither."""
    import ir_measures

    try:
        return [ir_measures.parse_measure(text)]
    except (NameError, ValueError, SyntaxError, TypeError):
        pass
    try:
        return list(ir_measures.parse_trec_measure(text))
    except (NameError, ValueError, SyntaxError, TypeError, KeyError, IndexError):
        return []


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


def per_query(
    run: dict[str, dict[str, float]], dataset: Dataset, measures=DEFAULT_MEASURES
) -> dict[str, dict[str, float]]:
    """measure -> {qid: value} over ALL judged queries; a query missing from the run scores 0 (pytrec_eval would
    silently drop it from the denominator)."""
    judged = judged_query_ids(dataset)
    return measure_per_query({qid: dataset.qrels[qid] for qid in judged}, remove_excluded(run, dataset), measures)


def measure_per_query(
    qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], measures
) -> dict[str, dict[str, float]]:
    """measure -> {qid: value} over every query of ``qrels``; a query missing from the run scores 0."""
    import ir_measures

    parsed = parse_measures(measures)
    values = {str(m): {qid: _unranked(m, rels) for qid, rels in qrels.items()} for m in parsed}
    ranked = {q: d for q, d in run.items() if q in qrels and d}
    for metric in ir_measures.iter_calc(parsed, qrels, ranked):
        if metric.query_id in ranked:  # ir_measures gives an unranked query 0 for every measure, NumQ included
            values[str(metric.measure)][metric.query_id] = float(metric.value)
    return values


def _unranked(measure, rels: dict[str, int]) -> float:
    """A measure's value for a query the run ranks nothing for, as ``trec_eval -c`` gives it: 0, but for the
    counts that do not read the ranking (the query itself, its relevant documents)."""
    if measure.NAME == "NumQ":
        return 1.0
    if measure.NAME == "NumRel":
        return float(sum(r >= measure.params.get("rel", 1) for r in rels.values()))
    return 0.0


def evaluate(run: dict[str, dict[str, float]], dataset: Dataset, measures=DEFAULT_MEASURES,
             judged_in_run: bool = False) -> dict:
    """Mean of each measure over ALL judged queries (a query missing from the run scores 0: ``trec_eval -c``,
    ir_measures and pt.Experiment), or with ``judged_in_run`` over the judged queries the run holds (trec_eval
    without ``-c``)."""
    return means(scored_queries(run, dataset, measures, judged_in_run))


def scored_queries(run: dict[str, dict[str, float]], dataset: Dataset, measures=DEFAULT_MEASURES,
                   judged_in_run: bool = False) -> dict[str, dict[str, float]]:
    """measure -> {qid: value} over the queries ``evaluate``'s means are over (see there)."""
    if judged_in_run:
        present = set(run)
        dataset = Dataset(dataset.name, [], [q for q in dataset.queries if q.id in present],
                          {qid: rels for qid, rels in dataset.qrels.items() if qid in present})
    return per_query(run, dataset, measures)


def means(values: dict[str, dict[str, float]]) -> dict:
    """Each measure's mean over its queries, and how many queries that is (``queries``). Counts (NumQ, NumRet,
    NumRel) are summed, as ir_measures aggregates them and trec_eval's 'all' row prints them."""
    result: dict = {name: (sum(v.values()) / (1 if _is_count(name) else len(v)) if v else 0.0)
                    for name, v in values.items()}
    result["queries"] = len(next(iter(values.values()), {}))
    return result


def by_query(values: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """qid -> {measure: value}, queries in trec_eval's order (by id as a string), as pytrec_eval keys them."""
    qids = sorted({qid for per in values.values() for qid in per})
    return {qid: {name: per[qid] for name, per in values.items()} for qid in qids}


COUNTS = ("NumQ", "NumRet", "NumRel")  # trec_eval prints these as integers, and their 'all' row is the sum


def _is_count(name: str) -> bool:
    import ir_measures

    try:
        return ir_measures.parse_measure(name).NAME in COUNTS
    except (ValueError, NameError, SyntaxError):  # a name only our own measures know
        return False


def trec_eval_name(measure) -> str:
    """The name trec_eval prints for an ir_measures measure it computes (``nDCG@10`` -> ``ndcg_cut_10``,
    ``AP`` -> ``map``); a measure trec_eval has no name for (``RR@10``, ``AP(rel=2)``) keeps ir_measures' name."""
    params, name = dict(measure.params), measure.NAME
    cutoff, rel = params.pop("cutoff", None), params.pop("rel", None)
    if params or rel not in (None, 1):  # another relevance level or option: trec_eval needs flags for it
        return str(measure)
    if name == "NumRet" and rel == 1:  # the retrieved documents that are relevant
        return "num_rel_ret"
    plain = {"nDCG": "ndcg", "AP": "map", "RR": "recip_rank", "Rprec": "Rprec", "Bpref": "bpref", "NumQ": "num_q",
             "NumRet": "num_ret", "NumRel": "num_rel", "SetP": "set_P", "SetR": "set_recall", "SetAP": "set_map"}
    cut = {"nDCG": "ndcg_cut", "AP": "map_cut", "P": "P", "R": "recall", "Success": "success"}
    if cutoff is None and name in plain:
        return plain[name]
    if cutoff is not None and name in cut:
        return f"{cut[name]}_{cutoff}"
    return str(measure)


# the order trec_eval prints its measures in, whatever order they were asked for (its measures.c table)
TREC_EVAL_ORDER = ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "Rprec", "bpref", "recip_rank", "P", "recall",
                   "ndcg", "ndcg_cut", "map_cut", "success", "set_P", "set_recall", "set_map")


def _trec_eval_rank(name: str) -> tuple[int, int]:
    """Where trec_eval prints a measure: by its table, then by cutoff; one it has no name for comes last."""
    base, _, cutoff = name.rpartition("_")
    if not cutoff.isdigit():
        base, cutoff = name, "0"
    return (TREC_EVAL_ORDER.index(base) if base in TREC_EVAL_ORDER else len(TREC_EVAL_ORDER), int(cutoff))


def trec_eval_text(values: dict[str, dict[str, float]], queries: bool = False) -> str:
    """trec_eval's output for ``values`` (measure -> {qid: value}): with ``queries`` (``trec_eval -q``) each
    query's rows first, by query id, then the ``all`` rows; one ``name<TAB>qid<TAB>value`` line each, the value
    to 4 places, the name padded to 22 characters, in trec_eval's order of measures, as trec_eval prints them."""
    import ir_measures

    parsed = {name: ir_measures.parse_measure(name) for name in values}
    names = {name: trec_eval_name(measure) for name, measure in parsed.items()}
    values = {name: values[name] for name in sorted(values, key=lambda n: _trec_eval_rank(names[n]))}
    counts = {name for name, measure in parsed.items() if measure.NAME in COUNTS}

    def row(name: str, qid: str, value: float) -> str:
        shown = f"{round(value)}" if name in counts else f"{value:6.4f}"
        return f"{names[name]:<22}\t{qid}\t{shown}\n"

    lines = (
        [row(name, qid, value) for qid, per in by_query(values).items() for name, value in per.items()]
        if queries
        else []
    )
    for name, per in values.items():
        total = sum(per.values())
        lines.append(row(name, "all", total if name in counts else (total / len(per) if per else 0.0)))
    return "".join(lines)


def coverage(run: dict[str, dict[str, float]], dataset: Dataset) -> dict:
    """How many of the dataset's judged queries the run answers (holds at least one document for)."""
    judged = judged_query_ids(dataset)
    answered = [qid for qid in judged if run.get(qid)]
    return {"judged_queries": len(judged), "judged_queries_in_run": len(answered)}


def averaging_line(covered: dict, dataset_name: str, run_name, judged_in_run: bool) -> str:
    """The one line saying which queries ``evaluate``'s means are over, and how many the run lacks."""
    judged, answered = covered["judged_queries"], covered["judged_queries_in_run"]
    missing = judged - answered
    if judged_in_run:
        text = (
            f"means over the {answered} judged queries of {dataset_name} that {run_name} answers "
            "(--judged-in-run; trec_eval without -c)"
        )
        return text + (f"; {missing} judged queries are missing from it and left out" if missing else "")
    if not missing:
        return f"means over all {judged} judged queries of {dataset_name}, every one answered by {run_name}"
    return (
        f"warning: {run_name} answers {answered} of the {judged} judged queries of {dataset_name}; means "
        f"over all {judged}, "
        f"the {missing} missing scoring 0 (trec_eval -c); --judged-in-run averages over the {answered} it answers"
    )
