"""The numbers of a method x budget matrix on one dataset, gathered from its run folders: per-query scores,
means, costs, reachability by hop distance, and every cell compared with the baseline at the same budget.
Tables and figures are drawn from this and nothing else.

Every score of a matrix is over one set of queries, the judged queries every run folder of the dataset answered
(all of them, unless ``--limit`` or a partial merge made fewer): a mean and the paired test beside it can then never
be over different queries. A TREC run file of another system is scored over the same set, a query it does not
rank scoring 0."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from garen_infer.data.dataset import Dataset
from garen_infer.errors import GarenError
from garen_infer.evaluation.costs import TokenPrices, prices_for
from garen_infer.evaluation.evaluate import judged_query_ids
from garen_infer.evaluation.reachability import hit_by_hops, reach
from garen_infer.report.run_results import MEASURES, RunResult, ranking_rows
from garen_infer.report.significance import PairedComparison, compare_paired, holm

if TYPE_CHECKING:
    from garen_infer.index.folder import IndexFolder


@dataclass
class Cell:
    label: str  # the method entry's label (a row of the tables)
    method: str
    budget: int | None  # None: the method has no budget
    run: RunResult
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # measure -> query id -> value
    cost: dict = field(default_factory=dict)
    reach: dict = field(default_factory=dict)  # hop distance -> {"queries", "hit@100"}
    # budget column -> measure -> this cell against the baseline there (a cell without a budget meets each column's)
    versus: dict[int | None, dict[str, PairedComparison]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.label if self.budget is None else f"{self.label}@{self.budget}"

    def mean(self, measure: str) -> float:
        values = self.scores[measure]
        return sum(values.values()) / len(values) if values else 0.0

    @property
    def queries(self) -> int:
        return len(next(iter(self.scores.values()), {}))


@dataclass
class Skipped:
    label: str
    budget: int | None
    reason: str


@dataclass
class DatasetMatrix:
    name: str  # the bench's name for the dataset
    dataset_name: str  # the loader's name, e.g. scifact/test
    documents: int
    judged_queries: int
    index: str
    labels: list[str]  # rows, in the bench file's order
    budgets: list[int]  # columns
    cells: list[Cell] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    baseline: str | None = None
    embedding_model: str | None = None  # the index's embeddings stage model, which embedding roles use
    measures: tuple[str, ...] = MEASURES  # the first is the one cost, significance and cost plots use
    run_files: dict[str, Path] = field(default_factory=dict)  # label -> a TREC run file of another system (no budget)
    queries: list[str] = field(default_factory=list)  # the judged queries every score is over (``shared_queries``)

    def cell(self, label: str, budget: int | None) -> Cell | None:
        """The cell of a row at a budget column; a method without a budget stands in every column."""
        for c in self.cells:
            if c.label == label and (c.budget == budget or c.budget is None):
                return c
        return None

    def row(self, label: str) -> list[Cell]:
        return [c for c in self.cells if c.label == label]

    def queries_text(self) -> str:
        """Which queries every number is over: all of the judged ones, or the ones every run folder answered."""
        # a matrix filled by hand has no set
        scored = len(self.queries) or max((c.queries for c in self.cells), default=0)
        if scored == self.judged_queries:
            return f"all {self.judged_queries} judged queries"
        return f"the {scored} of {self.judged_queries} judged queries every run folder answered, for every row"

    def columns_of(self, cell: Cell) -> list[int | None]:
        if cell.budget is not None:
            return [cell.budget]
        return [*self.budgets] if self.budgets else [None]


def collect(matrix: DatasetMatrix, dataset: Dataset, index: IndexFolder, bench_prices: dict[str, TokenPrices],
            significance, first_stage_rows) -> DatasetMatrix:
    """Fill every cell's scores (over ``shared_queries``), cost and reachability, then compare each with the
    baseline at its budget (the bench file's ``significance``: tests, bootstrap and correction).
    ``first_stage_rows(first_stage_config) -> {qid: rows}`` is asked only for runs that did not record reach."""
    matrix.queries = shared_queries(matrix, dataset)
    for cell in matrix.cells:
        cell.scores = cell.run.per_query(dataset, matrix.measures, matrix.queries)
        cell.cost = cell.run.cost({**prices_for(cell.run.config.get("models", {})), **bench_prices}, matrix.queries)
        cell.reach = _reach(cell.run, dataset, index, first_stage_rows, set(matrix.queries))
    return compare_with_baseline(matrix, significance)


def shared_queries(matrix: DatasetMatrix, dataset: Dataset) -> list[str]:
    """The judged queries every run folder of the matrix answered (all judged queries when it has none), sorted."""
    answered = [set(c.run.records) for c in matrix.cells if not c.run.external]
    queries = sorted(set(judged_query_ids(dataset)).intersection(*answered))
    if not queries:
        raise GarenError(
            f"{matrix.name}: no judged query is answered by every run folder "
            f"({', '.join(c.name for c in matrix.cells)}), "
            "so no table can compare them on the same queries; run the cells over the same "
            "queries (one --limit)"
        )
    return queries


def compare_with_baseline(matrix: DatasetMatrix, significance) -> DatasetMatrix:
    """Each cell against the baseline at its budget, per measure; Holm-adjusted when the bench file says so (the
    comparisons a test cannot speak for, see ``testable``, are shown but neither adjusted nor marked)."""
    for cell in matrix.cells:
        for column in matrix.columns_of(cell):
            base = matrix.cell(matrix.baseline, column) if matrix.baseline else None
            if base is not None and base is not cell:
                cell.versus[column] = {
                    m: paired(
                        cell.scores[m],
                        base.scores[m],
                        significance.permutations,
                        significance.seed,
                        significance.bootstrap,
                        1 - significance.alpha,
                    )
                    for m in matrix.measures
                }
    if significance.correction == "holm":
        _holm_adjust(matrix)
    return matrix


def testable(measure: str, budget: int | None) -> bool:
    """Whether a difference in ``measure`` at ``budget`` can say anything about a method: not when the measure's
    cutoff exceeds the budget (R@100 at budget 50), where the ranks below the budget are the first stage's for the
    reranking baseline, so a method that fills them otherwise differs by construction."""
    import ir_measures

    cutoff = ir_measures.parse_measure(measure).params.get("cutoff")
    return budget is None or cutoff is None or cutoff <= budget


def family(matrix: DatasetMatrix, measure: str, run_files: bool = False) -> list[tuple[Cell, int | None]]:
    """The comparisons adjusted together on one dataset and measure: the bench file's methods at every budget
    against the baseline (fixed by the bench file's methods and budgets), or, apart, the other systems' run files,
    so that adding a run file never moves the marks of a method."""
    return [(cell, column) for cell in matrix.cells for column in cell.versus
            if testable(measure, column) and (cell.label in matrix.run_files) == run_files]


def _holm_adjust(matrix: DatasetMatrix) -> None:
    """Holm within each ``family``: the marks keep a 5% family-wise error however many cells the bench holds."""
    for measure in matrix.measures:
        for run_files in (False, True):
            members = family(matrix, measure, run_files)
            adjusted = holm([cell.versus[column][measure].t_test_p for cell, column in members])
            for (cell, column), p in zip(members, adjusted):
                cell.versus[column][measure] = replace(cell.versus[column][measure], t_test_p_adjusted=p)


def paired(
    a: dict[str, float],
    b: dict[str, float],
    permutations: int,
    seed: int,
    resamples: int = 10_000,
    confidence: float = 0.95,
) -> PairedComparison:
    """Compare on the queries both runs answered, in a fixed (sorted) order."""
    common = sorted(set(a) & set(b))
    return compare_paired([a[q] for q in common], [b[q] for q in common], permutations, seed,
                          resamples=resamples, confidence=confidence)


def _reach(run: RunResult, dataset: Dataset, index: IndexFolder, first_stage_rows, queries: set[str]) -> dict:
    """Hit@100 by hop distance from the first-stage top 20 (GAREN Fig. 4/8) over ``queries``: what the run
    recorded, or computed here from the run's rankings, its first stage and the index's k-NN graph."""
    records = {qid: r for qid, r in run.records.items() if qid in queries}
    if run.external:  # another system's first stage is not ours: distances from ours would mean nothing
        return {}
    if any("reach" in r for r in records.values()):
        return hit_by_hops([r.get("reach") for r in records.values()])
    if index is None or not index.has("knn_graph"):
        return {}
    rows = first_stage_rows(run.config.get("first_stage") or {})
    reaches = []
    for qid, record in records.items():
        gold = {
            dataset.doc_index[d]
            for d, rel in dataset.qrels.get(qid, {}).items()
            if rel > 0 and d in dataset.doc_index
        }
        if gold and qid in rows:
            reaches.append(reach(index.knn_graph, rows[qid], gold, ranking_rows(record, dataset)))
    return hit_by_hops(reaches)


def gold_distances(cell: Cell) -> dict[str, list[int | None]] | None:
    """GAREN's per-query minimum hops to a gold document on the document and the group graph (App. C.1, Fig. 9),
    for the queries whose gold documents all lie outside the first window; None for runs without them."""
    golds = [r["trace"]["gold"] for r in cell.run.records.values() if "gold" in r.get("trace", {})]
    golds = [g for g in golds if g.get("min_hops_doc_graph") != 0 and "min_hops_group_graph" in g]
    if not golds:
        return None
    return {"document graph": [g["min_hops_doc_graph"] for g in golds],
            "group graph": [g["min_hops_group_graph"] for g in golds]}


def matrix_json(matrix: DatasetMatrix) -> dict:
    """Every number of the matrix, for results.json."""
    cells = []
    for c in matrix.cells:
        cells.append({
            "label": c.label, "method": c.method, "budget": c.budget, "run": str(c.run.folder), "queries": c.queries,
            **{m: round(c.mean(m), 6) for m in matrix.measures}, "cost_per_query": _rounded(c.cost),
            "hit@100_by_min_hops": c.reach,
            "versus_baseline": [{"budget": b, **{m: v.to_dict() for m, v in by.items()}} for b, by in c.versus.items()],
            "config": c.run.config,
        })
    return {"dataset": matrix.dataset_name, "documents": matrix.documents, "judged_queries": matrix.judged_queries,
            "queries": len(matrix.queries), "queries_scored": matrix.queries_text(),
            "index": matrix.index, "budgets": matrix.budgets, "baseline": matrix.baseline,
            "measures": list(matrix.measures), "cells": cells,
            "skipped": [{"label": s.label, "budget": s.budget, "reason": s.reason} for s in matrix.skipped]}


def _rounded(value):
    if isinstance(value, float):
        return float(f"{value:.6g}")  # significant digits: a query's dollars are often below 1e-4
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def per_query_rows(matrix: DatasetMatrix) -> list[list]:
    """Rows of per_query.csv: dataset, label, budget, query id, then one value per measure (for one's own analyses)."""
    rows = []
    for c in matrix.cells:
        for qid in sorted(c.scores[matrix.measures[0]]):
            rows.append([matrix.name, c.label, "" if c.budget is None else c.budget, qid,
                         *(f"{c.scores[m][qid]:.6f}" for m in matrix.measures)])
    return rows


def first_stage_provider(index: IndexFolder, dataset: Dataset):
    """first_stage_rows for ``collect``: judged queries' first-stage rows per first-stage config, computed once."""
    from garen_infer.index.first_stage import FirstStageConfig, first_stage

    cache: dict[str, dict[str, list[int]]] = {}

    def rows(config: dict) -> dict[str, list[int]]:
        key = json.dumps(config, sort_keys=True)
        if key not in cache:
            queries = dataset.judged_queries()
            ranked = first_stage(index, [q.text for q in queries], FirstStageConfig(**config))
            cache[key] = {q.id: r for q, r in zip(queries, ranked)}
        return cache[key]

    return rows

