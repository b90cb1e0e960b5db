"""Evaluation queries never enter a training file.

A query is an evaluation query when its id, or its text (case and spacing ignored), is one of an evaluation
split's. Query ids alone are not enough: SciFact's train split repeats two test claims word for word under other
ids (train 1291 = test 1292, train 871 = test 870).

The evaluation splits are those named with ``--eval-dataset``, plus, for a BEIR folder, its ``test`` and ``dev``
splits (``qrels/test.tsv``, ``qrels/dev.tsv``) other than the split being mined, and for a ``jsonl:`` spec the
``test``/``dev`` qrels files beside its own. Mining a split that is itself an evaluation split (a BEIR ``test`` or
``dev`` split, a ``jsonl:`` spec whose qrels file is named for one, any BRIGHT task: BRIGHT has test queries only)
needs ``--evaluation``: the output is then marked evaluation data, which training refuses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from garen_infer.data.dataset import Query
from garen_infer.data.spec import beir_location
from garen_infer.errors import GarenError

EVALUATION_SPLITS = ("test", "dev")  # BEIR's held-out splits, by name
SHOWN = 5  # overlapping ids named in an error, then a count


def normalise(text: str) -> str:
    return " ".join(text.casefold().split())


@dataclass(frozen=True)
class Overlap:
    qid: str  # the query that may not train
    evaluation: str  # the evaluation split's name, e.g. "scifact/test"
    evaluation_qid: str
    by: str  # "id" | "text"

    def describe(self) -> str:
        return self.qid if self.by == "id" else f"{self.qid} (text of {self.evaluation_qid})"


def find_overlap(queries: list[Query], evaluation: str, evaluation_queries: list[Query]) -> list[Overlap]:
    by_id = {q.id for q in evaluation_queries}
    by_text = {normalise(q.text): q.id for q in evaluation_queries}
    found = []
    for q in queries:
        if q.id in by_id:
            found.append(Overlap(q.id, evaluation, q.id, "id"))
        elif normalise(q.text) in by_text:
            found.append(Overlap(q.id, evaluation, by_text[normalise(q.text)], "text"))
    return found


def describe(overlaps: list[Overlap], split: str) -> str:
    """One sentence naming the queries of ``split`` that are evaluation queries, and where they come from."""
    by_split: dict[str, list[Overlap]] = {}
    for o in overlaps:
        by_split.setdefault(o.evaluation, []).append(o)
    parts = []
    for evaluation, found in by_split.items():
        named = ", ".join(o.describe() for o in found[:SHOWN]) + (
            f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
        )
        parts.append(f"{len(found)} in evaluation split {evaluation} ({named})")
    return f"queries of {split} are evaluation queries: " + "; ".join(parts)


def jsonl_files(spec: str) -> list[str] | None:
    """The files of a ``jsonl:corpus[,queries[,qrels]]`` spec; None for a spec of another kind."""
    kind, _, rest = spec.partition(":")
    return rest.split(",") if kind == "jsonl" and rest else None


def automatic_evaluation_specs(spec: str) -> list[str]:
    """The held-out splits beside the mined one: a BEIR folder's ``test`` and ``dev`` splits, or the ``test.tsv``
    and ``dev.tsv`` qrels beside a ``jsonl:`` spec's qrels file (the mined split excepted)."""
    location, files = beir_location(spec), jsonl_files(spec)
    if location is not None:
        folder, split = location
        return [
            f"beir:{folder}:{s}"
            for s in EVALUATION_SPLITS
            if s != split and (Path(folder) / "qrels" / f"{s}.tsv").is_file()
        ]
    if files is not None and len(files) == 3:
        qrels = Path(files[2])
        siblings = [qrels.with_name(f"{s}{qrels.suffix}") for s in EVALUATION_SPLITS]
        return [f"jsonl:{files[0]},{files[1]},{p}" for p in siblings if p.is_file() and p.resolve() != qrels.resolve()]
    return []


def is_evaluation_split(spec: str) -> bool:
    """A BEIR test/dev split, a jsonl spec whose qrels file is named for one (``qrels/test.tsv``,
    ``scifact-dev.tsv``), or a BRIGHT task (BRIGHT publishes test queries only)."""
    location, files = beir_location(spec), jsonl_files(spec)
    if location is not None:
        return location[1] in EVALUATION_SPLITS
    if files is not None and len(files) == 3:
        return any(word in EVALUATION_SPLITS for word in re.split(r"[^a-z0-9]+", Path(files[2]).stem.casefold()))
    return spec.partition(":")[0] == "bright"


def check_disjoint(queries: list[Query], split: str, evaluation_sets: dict[str, list[Query]]) -> None:
    """Refuse, in one line, any query of ``split`` that is also an evaluation query."""
    overlaps = [o for name, evaluation in evaluation_sets.items() for o in find_overlap(queries, name, evaluation)]
    if overlaps:
        raise EvaluationOverlap(describe(overlaps, split), overlaps)


class EvaluationOverlap(GarenError):
    def __init__(self, message: str, overlaps: list[Overlap]):
        super().__init__(message)
        self.overlaps = overlaps
