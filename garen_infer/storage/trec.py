"""TREC run files. Scores are strictly decreasing by construction: trec_eval breaks ties by docno, not by
list order, so equal scores would silently reorder a ranking.

Runs are read gzipped or not. A run that ranks one document twice for a query is refused: which of its lines counts
would decide the scores (nDCG@10 of 1.0 or 0.0 by line order alone), and trec_eval refuses such a run too."""

from __future__ import annotations

import math
from pathlib import Path

from garen_infer.data.validate import read_text
from garen_infer.errors import DataError
from garen_infer.storage.atomic import write_text


def format_run(rankings: dict[str, list[str]], tag: str) -> str:
    lines = []
    for qid, doc_ids in rankings.items():
        n = len(doc_ids)
        lines.extend(f"{qid} Q0 {doc} {rank + 1} {n - rank} {tag}" for rank, doc in enumerate(doc_ids))
    return "\n".join(lines) + ("\n" if lines else "")


def write_run(path: Path, rankings: dict[str, list[str]], tag: str) -> None:
    write_text(path, format_run(rankings, tag))


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
