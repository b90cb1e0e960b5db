"""What a report reads from a finished run folder: its configuration, its per-query scores, and what each query
cost (calls, tokens, seconds, dollars per role), all from the files the runner wrote.

Per-query scores are recomputed from ``run.trec`` against the dataset's judgements, for the queries the run
answered (``trace.jsonl``) or for the queries a caller names (a report's one set for every row).

A plain TREC run file made by another system (Anserini, PyTerrier, rank_llm) is read the same way: its queries
are the ones it ranks documents for; it has no configuration and no cost (shown as unknown, never as 0).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from garen_infer.data.dataset import Dataset
from garen_infer.errors import GarenError
from garen_infer.evaluation.costs import TokenPrices, query_cost
from garen_infer.evaluation.evaluate import per_query
from garen_infer.llm.problems import UNUSABLE
from garen_infer.storage.append_log import read_finished
from garen_infer.storage.trec import read_run, read_tag

MEASURES = ("nDCG@10", "R@100")
TIMING_LOG = "bench_timing.jsonl"  # wall seconds of the queries ``garen-infer bench`` ran in this folder
LEDGER_TOTALS = ("requests", "model_calls", "cache_hits", "input_tokens", "output_tokens", "model_seconds",
                 "budget_used")
ROLE_FIELDS = ("requests", "model_calls", "cache_hits", "input_tokens", "output_tokens", "seconds")


@dataclass
class RunResult:
    folder: Path
    config: dict  # config.json: the resolved configuration
    metrics: dict  # metrics.json
    records: dict[str, dict] = field(repr=False)  # trace.jsonl by query id, in the order queries finished

    @classmethod
    def load(cls, folder: str | Path) -> RunResult:
        """A finished run folder, or a TREC run file."""
        folder = Path(folder)
        if folder.is_file():
            return cls.from_run_file(folder)
        for name in ("config.json", "metrics.json", "run.trec", "trace.jsonl"):
            if not (folder / name).is_file():
                raise GarenError(f"{folder}: not a finished run folder (no {name}); run it to the end with "
                                 "'garen-infer run' first")
        return cls(folder, json.loads((folder / "config.json").read_text()),
                   json.loads((folder / "metrics.json").read_text()),
                   read_finished(folder / "trace.jsonl", "qid"))

    @classmethod
    def from_run_file(cls, path: Path) -> RunResult:
        """A TREC run file from any system: its rankings, without configuration or cost."""
        run = read_run(path)
        if not run:
            raise GarenError(f"{path}: an empty run file (no ranked documents)")
        result = cls(path, {"method": "run file", "run_file": str(path), "tag": read_tag(path)}, {},
                     {qid: {} for qid in run})
        result.__dict__["run"] = run  # read once (the cached property below)
        return result

    @property
    def external(self) -> bool:
        """Made by another system: a TREC run file, not a run folder."""
        return "run_file" in self.config

    @property
    def method(self) -> str:
        return self.config["method"]

    @property
    def budget(self) -> int | None:
        return self.config.get("budget")

    def check_dataset(self, dataset: Dataset) -> None:
        if self.external:  # no fingerprint: the run must at least rank this dataset's queries and documents
            run = self.run
            if not set(run) & {q.id for q in dataset.queries}:
                raise GarenError(f"{self.folder}: none of its {len(run)} query ids is a query of "
                                 f"'{dataset.name}'; pass the dataset the run was made on")
            ranked = (d for docs in run.values() for d in docs)
            if not dataset.judgments_only and not any(d in dataset.doc_index for d in ranked):
                raise GarenError(f"{self.folder}: none of its document ids is a document of "
                                 f"'{dataset.name}'; pass the dataset the run was made on")
            return
        if dataset.judgments_only:  # no corpus read (eval, compare): the run must name this dataset
            same = self.config.get("dataset") == dataset.name
        else:
            fingerprint = self.config.get("corpus_fingerprint")
            same = not fingerprint or fingerprint == dataset.fingerprint()
        if not same:
            raise GarenError(f"{self.folder}: this run was made on corpus '{self.config.get('dataset')}', "
                             f"not on '{dataset.name}'; pass the dataset the run used")

    # ---- quality ------------------------------------------------------------------------------------------
    def per_query(self, dataset: Dataset, measures=MEASURES, queries=None) -> dict[str, dict[str, float]]:
        """measure -> {query id: value} over the judged queries this run answered, or over the judged ones of
        ``queries`` (a query the run does not rank scores 0)."""
        self.check_dataset(dataset)
        wanted = set(self.records) if queries is None else set(queries)
        judged = {qid: rels for qid, rels in dataset.qrels.items() if qid in wanted}
        subset = Dataset(dataset.name, [], [q for q in dataset.queries if q.id in judged], judged)
        return per_query(self.run, subset, measures)

    @cached_property
    def run(self) -> dict[str, dict[str, float]]:
        return read_run(self.folder if self.external else self.folder / "run.trec")

    # ---- cost -------------------------------------------------------------------------------------------------
    def ledgers(self, queries=None) -> list[dict]:
        """The finished queries' ledgers, or those of ``queries`` only."""
        return [r["ledger"] for qid, r in self.records.items() if queries is None or qid in queries]

    def cost(self, prices: dict[str, TokenPrices], queries=None) -> dict:
        """Means per query (over ``queries`` when given): ledger totals, the same per role, and dollars per priced
        role and in total.
        ``unpriced`` names roles that used tokens without a price (their dollars are unknown, not 0). A run file's
        cost is unknown: every total is None."""
        if self.external:
            return {**dict.fromkeys(LEDGER_TOTALS), "roles": {}, "unpriced": [], "wall_seconds": None}
        ledgers = self.ledgers(None if queries is None else set(queries))
        n = max(len(ledgers), 1)
        out = {key: sum(ledger[key] for ledger in ledgers) / n for key in LEDGER_TOTALS}
        roles = sorted({role for ledger in ledgers for role in ledger["roles"]})
        out["roles"] = {
            role: {
                key: sum(ledger["roles"].get(role, {}).get(key, 0) for ledger in ledgers) / n
                for key in ROLE_FIELDS
            }
            for role in roles
        }
        for role in roles:
            out["roles"][role]["unusable"] = unusable_share([ledger["roles"].get(role, {}) for ledger in ledgers])
        out["unusable"] = unusable_share([cost for ledger in ledgers for cost in ledger["roles"].values()])
        priced = {role: p for role, p in prices.items() if role in roles}
        out["unpriced"] = [
            r
            for r in roles
            if r not in priced and (out["roles"][r]["input_tokens"] or out["roles"][r]["output_tokens"])
        ]
        if priced:
            dollars = [query_cost(ledger, priced) for ledger in ledgers]
            for role in priced:
                out["roles"][role]["dollars"] = sum(d[role] for d in dollars) / n
            out["dollars"] = None if out["unpriced"] else sum(d["total"] for d in dollars) / n
        out["wall_seconds"] = self.wall_seconds_per_query
        return out

    @cached_property
    def wall_seconds_per_query(self) -> float | None:
        """Measured wall time per query when ``garen-infer bench`` ran this folder's queries (None if it did not)."""
        path = self.folder / TIMING_LOG
        if not path.is_file():
            return None
        entries = list(read_finished(path, "at").values())
        queries = sum(e["queries"] for e in entries)
        return sum(e["wall_seconds"] for e in entries) / queries if queries else None


def unusable_share(costs: list[dict]) -> float:
    """The share of these answers (ledger role entries) that gave nothing usable (llm/problems.py UNUSABLE); 0 for
    ledgers written before answers were counted."""
    answers = sum(c.get("requests", 0) for c in costs)
    unusable = sum(c.get("problems", {}).get(kind, 0) for c in costs for kind in UNUSABLE)
    return unusable / answers if answers else 0.0


def ranking_rows(record: dict, dataset: Dataset) -> list[int]:
    return [dataset.doc_index[d] for d in record["ranking"] if d in dataset.doc_index]
