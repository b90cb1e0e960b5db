"""TREC run files. Scores are strictly decreasing by construction: trec_eval breaks ties by docno, not by
list order, so equal scores would silently reorder a ranking."""

from __future__ import annotations

from pathlib import Path

from garen_infer.errors import DataError
from garen_infer.index.atomic import write_text


def format_run(rankings: dict[str, list[str]], tag: str) -> str:
    lines = []
    for qid, doc_ids in rankings.items():
        n = len(doc_ids)
        lines.extend(f"{qid} Q0 {doc} {rank + 1} {n - rank} {tag}" for rank, doc in enumerate(doc_ids))
    return "\n".join(lines) + ("\n" if lines else "")


def write_run(path: Path, rankings: dict[str, list[str]], tag: str) -> None:
    write_text(path, format_run(rankings, tag))


def read_run(path: str | Path) -> dict[str, dict[str, float]]:
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "file not found")
    run: dict[str, dict[str, float]] = {}
    # utf-8-sig: a byte order mark (Windows tools write one) would otherwise become part of the first query id
    for line_no, line in enumerate(path.read_text(encoding="utf-8-sig", errors="strict").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise DataError(path, f"expected 6 columns (qid Q0 docid rank score tag), got {len(parts)}", line_no)
        try:
            run.setdefault(parts[0], {})[parts[2]] = float(parts[4])
        except ValueError:
            raise DataError(path, f"score '{parts[4]}' is not a number", line_no, "score")
    return run


def read_tag(path: str | Path) -> str:
    """The run tag (sixth column) of a run file's first line: which system made it."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                return line.split()[-1]
    return ""
