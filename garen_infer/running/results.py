"""A run's finished queries and what its folder says about them: ``run.trec`` and ``metrics.json``."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from garen_infer.configuration.run_config import RunConfig
from garen_infer.data.dataset import Dataset, Query
from garen_infer.evaluation.costs import mean_cost, prices_for
from garen_infer.evaluation.evaluate import evaluate, remove_excluded
from garen_infer.evaluation.reachability import hit_by_hops
from garen_infer.llm.oracle import RUN_TAG
from garen_infer.llm.problems import UNUSABLE
from garen_infer.methods.base import PSEUDO
from garen_infer.storage.atomic import write_json
from garen_infer.storage.trec import run_scores, write_run

if TYPE_CHECKING:
    from garen_infer.methods.base import Method

LEDGER_MEANS = ("budget_used", "requests", "model_calls", "cache_hits", "input_tokens", "output_tokens",
                "model_seconds")


@dataclass
class RunResults:
    """The trace records (``records``: qid -> record) of a run's ``queries``, finished; ``wall`` seconds answered
    ``fresh`` of them in this process. ``label`` (a partial merge's) leads metrics.json."""

    dataset: Dataset
    method: str
    queries: list[Query]
    records: dict[str, dict]
    method_cls: type[Method]
    simulation: dict | None = None
    models: dict | None = None
    wall: float = 0.0
    fresh: int = 0
    label: dict | None = None
    warn_share: float = RunConfig.unusable_answers_warning
    engines: dict | None = None  # what each model's engine started with (``engine_report.py``)

    def rankings(self) -> dict[str, list[str]]:
        return {q.id: self.records[q.id]["ranking"] for q in self.queries}

    @cached_property
    def _scored(self) -> tuple[dict[str, dict[str, float]], int]:
        """``scored_rankings`` of the finished records, once: run.trec, the metrics and the frames read it."""
        return scored_rankings({q.id: self.records[q.id] for q in self.queries}, self.dataset)

    def scored(self) -> dict[str, dict[str, float]]:
        return self._scored[0]

    def score_kinds(self) -> dict:
        """What the run's scores are (``scores``: bm25 | dense | given | reranker | pseudo, several joined by
        "+" where queries differ) and how many own scores were lowered to keep the ranking's order
        (``scores_lowered``)."""
        records = [self.records[q.id] for q in self.queries]
        kinds = sorted({r.get("score_kind", PSEUDO) for r in records if r["ranking"]}) or [PSEUDO]
        return {"scores": "+".join(kinds), "scores_lowered": self._scored[1]}

    def ranked_rows(self) -> list[tuple[str, str, int, float]]:
        """(qid, docno, rank from 0, score) for every ranked document, the queries in order."""
        return [(qid, docno, rank, score) for qid, docs in self.scored().items()
                for rank, (docno, score) in enumerate(docs.items())]

    def write(self, out: Path, log) -> dict:
        """``run.trec`` and ``metrics.json`` in ``out``; returns the metrics."""
        kept = self.scored()
        write_run(out / "run.trec", kept, tag=f"{self.method}.{RUN_TAG}" if self.simulation else self.method)
        metrics = self.metrics(kept, log)
        write_json(out / "metrics.json", metrics)
        return metrics

    def metrics(self, kept: dict[str, dict[str, float]], log) -> dict:
        records = [self.records[q.id] for q in self.queries]
        metrics = {**(self.label or {}), "dataset": self.dataset.name, "method": self.method}
        if self.simulation:
            metrics = {"simulation": self.simulation, **metrics}
        metrics.update(self._quality(kept))
        metrics.update(self.score_kinds())
        ledgers = [record["ledger"] for record in records]
        n = max(len(ledgers), 1)
        for key in LEDGER_MEANS:
            metrics[f"mean_{key}"] = round(sum(ledger[key] for ledger in ledgers) / n, 4)
        metrics.update(truncations(ledgers))
        log(truncation_report(metrics))
        metrics.update(answer_problems(ledgers))
        for line in answer_problems_report(metrics, self.warn_share):
            log(line)
        metrics["mean_seconds_in_flight"] = round(sum(record["seconds"] for record in records) / n, 4)
        metrics.update(mean_cost(ledgers, prices_for(self.models or {})))  # Table 7's dollars, for priced models
        by_hops = hit_by_hops([record.get("reach") for record in records])
        if by_hops:
            metrics["hit@100_by_min_hops"] = by_hops
        if self.fresh:
            metrics["wall_seconds_per_query"] = round(self.wall / self.fresh, 4)
        metrics.update(self.method_cls.summarize(records))
        if self.engines:
            metrics["engines"] = self.engines
        return metrics

    def _quality(self, kept: dict[str, dict[str, float]]) -> dict:
        """The measures over the judged queries of this run, or the query count where nothing is judged."""
        if not self.dataset.qrels:
            return {"queries": len(self.queries)}
        judged = {q.id for q in self.queries}
        subset = Dataset(self.dataset.name, [], [q for q in self.dataset.queries if q.id in judged],
                         {k: v for k, v in self.dataset.qrels.items() if k in judged})
        return evaluate(kept, subset)


def scored_rankings(records: dict[str, dict], dataset: Dataset) -> tuple[dict[str, dict[str, float]], int]:
    """Each query's ranking (its trace record's) as document -> score, best first: BRIGHT's excluded ids
    removed (``evaluate.remove_excluded``, the one place that happens), then the scores ``trec.run_scores``
    gives from the record's own (``scores``; a record written before runs carried them has none:
    pseudo-scores). Also how many own scores were lowered to keep the order."""
    positions = {qid: {d: float(r) for r, d in enumerate(record["ranking"])}
                 for qid, record in records.items()}
    kept = remove_excluded(positions, dataset)
    scored, lowered = {}, 0
    for qid, docs in kept.items():
        own = records[qid].get("scores") or [None] * len(records[qid]["ranking"])
        scores, n = run_scores([own[int(r)] for r in docs.values()])
        scored[qid] = dict(zip(docs, scores))
        lowered += n
    return scored, lowered


def truncations(ledgers: list[dict]) -> dict:
    """Prompts cut to fit a model's limit over the whole run, in all and per role (ledgers written before the
    count existed read as 0)."""
    roles: dict[str, int] = {}
    for ledger in ledgers:
        for role, cost in ledger.get("roles", {}).items():
            roles[role] = roles.get(role, 0) + cost.get("truncated_prompts", 0)
    return {"truncated_prompts": sum(roles.values()),
            "truncated_prompts_by_role": {r: n for r, n in roles.items() if n},
            "truncated_tokens": sum(ledger.get("truncated_tokens", 0) for ledger in ledgers)}


def truncation_report(metrics: dict) -> str:
    """The run's one line about cut prompts: a healthy run says 0."""
    n = metrics["truncated_prompts"]
    if not n:
        return "[run] prompts cut to fit a model's limit: 0"
    by_role = ", ".join(f"{role} {count}" for role, count in metrics["truncated_prompts_by_role"].items())
    return (f"[run] prompts cut to fit a model's limit: {n} ({by_role}; {metrics['truncated_tokens']} tokens "
            "cut from their middles); raise max_model_len or max_length in the model spec, or show fewer "
            "words per passage")


def answer_problems(ledgers: list[dict]) -> dict:
    """Answers that were not what we asked for over the whole run, by kind, in all and per role, with each role's
    answer count."""
    answers: Counter = Counter()
    by_role: dict[str, Counter] = {}
    for ledger in ledgers:
        for role, cost in ledger.get("roles", {}).items():
            answers[role] += cost.get("requests", 0)
            by_role.setdefault(role, Counter()).update(cost.get("problems", {}))
    by_role = {role: kinds for role, kinds in sorted(by_role.items()) if kinds}
    return {
        "answer_problems": dict(sorted(sum(by_role.values(), Counter()).items())),
        "answer_problems_by_role": {
            role: {"answers": answers[role], **dict(sorted(kinds.items()))} for role, kinds in by_role.items()
        },
    }


def answer_problems_report(metrics: dict, warn_share: float) -> list[str]:
    """The run's line about answers it could not use as asked (a healthy run says none), then one loud line per
    role whose share of unusable answers is above ``warn_share``."""
    by_role = metrics["answer_problems_by_role"]
    if not by_role:
        return ["[run] answers not used as asked: none"]
    parts = "; ".join(
        f"{role} " + ", ".join(f"{k} {n}" for k, n in kinds.items() if k != "answers")
        for role, kinds in by_role.items()
    )
    lines = [f"[run] answers not used as asked: {parts}"]
    for role, kinds in by_role.items():
        unusable = sum(kinds.get(kind, 0) for kind in UNUSABLE)
        if kinds["answers"] and unusable / kinds["answers"] > warn_share:
            lines.append(
                f"[run] WARNING: {unusable} of the {kinds['answers']} {role} answers "
                f"({unusable / kinds['answers']:.0%}) gave "
                f"nothing usable (more than {warn_share:.0%}); this run's numbers rest on "
                "fallbacks, not on the model: read its answers in trace.jsonl or the response cache"
            )
    return lines
