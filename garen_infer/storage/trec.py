"""TREC run files. Scores are strictly decreasing by construction: trec_eval breaks ties by docno, not by
list order, so equal scores would silently reorder a ranking.

A ranking's scores are its scorer's own where it has one (``run_scores``): BM25's, the dense inner product, a
pointwise reranker's P(yes); a document without one (every document of a listwise or agent ranking, the
unreranked tail below a reranked head) carries a pseudo-score, the score above it minus 1, so a ranking
without any scores carries n - rank. trec_eval (and pytrec_eval, which ir_measures runs) keeps each score as a
32-bit float, so scores are written at that precision: a score that does not fall below the one above it there
(a tie, or a later document its scorer rated higher) is lowered to the next float32 below that one
(``numpy.nextafter``). The file's order, trec_eval's and ir_measures' are the ranking's, always.

Runs are read gzipped or not. A run that ranks one document twice for a query is refused: which of its lines counts
would decide the scores (nDCG@10 of 1.0 or 0.0 by line order alone), and trec_eval refuses such a run too."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from garen_infer.data.validate import read_text
from garen_infer.errors import DataError
from garen_infer.storage.atomic import write_text

LOWEST = np.float32(-np.inf)
FLOAT32_MAX = float(np.finfo(np.float32).max)  # a score beyond it has no float32: it reads as none


def as_written(score: float | None) -> float | None:
    """A document's own score as run.trec can hold it: the float its float32 text reads back as; None where it
    has none (None, a score that is not a finite float32)."""
    if score is None or not math.isfinite(score) or abs(score) > FLOAT32_MAX:
        return None
    return float(format_score(score))


def run_scores(real: list[float | None]) -> tuple[list[float], int]:
    """The scores a ranking (best first) carries, from each document's own score (None, or a non-finite one,
    where it has none): strictly decreasing as float32, each the float its text in run.trec reads back as; and
    how many own scores were lowered to keep the order."""
    out: list[float] = []
    lowered = 0
    for score in map(as_written, real):
        own = score is not None
        if score is not None:
            value = np.float32(score)
        else:  # a pseudo-score: n - rank when the ranking has no scores at all
            value = np.float32(max(out[-1] - 1.0, -FLOAT32_MAX) if out else float(len(real)))
        if out and value >= np.float32(out[-1]):
            value = np.nextafter(np.float32(out[-1]), LOWEST)  # a tie, or an order the score does not follow
            lowered += own
        out.append(float(format_score(float(value))))
    return out, lowered


def format_score(score: float) -> str:
    """A score as run.trec writes it: the shortest text that reads back as the same float32 (a whole number
    without ".0"), so that what trec_eval reads keeps the order ``run_scores`` gave."""
    text = str(np.float32(score))
    return text[:-2] if text.endswith(".0") else text


def format_run(run: dict[str, dict[str, float]], tag: str) -> str:
    """qid -> {docid: score} (each query's documents best first, scores strictly decreasing) as TREC lines."""
    lines: list[str] = []
    for qid, docs in run.items():
        scores = list(docs.values())
        if any(later >= earlier for earlier, later in zip(scores, scores[1:])):
            raise ValueError(f"query '{qid}': run scores must decrease strictly down the ranking")
        lines.extend(f"{qid} Q0 {doc} {rank + 1} {format_score(score)} {tag}"
                     for rank, (doc, score) in enumerate(docs.items()))
    return "\n".join(lines) + ("\n" if lines else "")


def write_run(path: Path, run: dict[str, dict[str, float]], tag: str) -> None:
    write_text(path, format_run(run, tag))


def read_run(path: str | Path) -> dict[str, dict[str, float]]:
    """qid -> {docid: score} of a TREC run file (gzipped or not); a malformed line or a (qid, docid) pair on two
    lines is one error naming the file and the line."""
    path = Path(path)
    run: dict[str, dict[str, float]] = {}
    first_line: dict[tuple[str, str], int] = {}
    for line_no, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise DataError(path, f"expected 6 columns (qid Q0 docid rank score tag), got {len(parts)}", line_no)
        qid, doc, score = parts[0], parts[2], parts[4]
        if (qid, doc) in first_line:
            raise DataError(
                path,
                f"document '{doc}' is ranked twice for query '{qid}' (first on line {first_line[qid, doc]}); "
                "which line counts would decide the scores: keep one line per query and "
                "document",
                line_no,
            )
        first_line[qid, doc] = line_no
        run.setdefault(qid, {})[doc] = _score(score, path, line_no)
    return run


def _score(text: str, path: Path, line_no: int) -> float:
    """A line's score: a finite number (NaN compares false both ways and would order a ranking at random)."""
    try:
        value = float(text)
    except ValueError:
        raise DataError(path, f"score '{text}' is not a number", line_no, "score") from None
    if not math.isfinite(value):
        raise DataError(path, f"score '{text}' is not a finite number; write each score as a finite number", line_no,
                        "score")
    return value


def read_tag(path: str | Path) -> str:
    """The run tag (sixth column) of a run file's first line: which system made it."""
    for line in read_text(Path(path)).splitlines():
        if line.strip():
            return line.split()[-1]
    return ""


def read_order(path: str | Path) -> list[tuple[str, str, int]]:
    """(qid, docid, rank) of each line of a run file, in file order: what two runs share when they rank alike,
    whatever their scores (benchmarks/identical_runs.py compares runs by it)."""
    rows = []
    for line in read_text(Path(path)).splitlines():
        if line.strip():
            qid, _, doc, rank, *_ = line.split()
            rows.append((qid, doc, int(rank)))
    return rows
