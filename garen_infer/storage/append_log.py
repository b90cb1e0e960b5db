"""Append-only JSONL logs of finished work (a run's queries, an index's group summaries).

Each record is one line, flushed when written; a process killed mid-write leaves at most one torn last line
(no newline), which reading cuts off so the next append starts clean. A complete line that does not read back
(a damaged disk block, an editor's slip) is reported and skipped: the records after it are kept, and the work it
recorded counts as not done.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path


def to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def read_finished(path: Path, key: str, report: Callable[[str], None] = to_stderr) -> dict:
    """Records by ``record[key]``; a torn tail is truncated away, a damaged line is reported and skipped."""
    done: dict = {}
    if not path.exists():
        return done
    good_bytes = 0
    with open(path, "rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            if not raw.endswith(b"\n"):
                break
            good_bytes += len(raw)
            problem = _add_record(raw, key, done)
            if problem:
                report(f"{path}, line {line_no}: {problem}; skipped (the lines after it are kept), "
                       f"so its work counts as not done")
    if good_bytes != path.stat().st_size:
        with open(path, "r+b") as handle:
            handle.truncate(good_bytes)
    return done


def _add_record(raw: bytes, key: str, done: dict) -> str | None:
    """Adds one line's record to ``done``; what is wrong with it, or None."""
    if not raw.strip():
        return None
    try:
        record = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        return f"not a JSON record ({err})"
    if not isinstance(record, dict) or not isinstance(record.get(key), (str, int)):
        return f"a record without its '{key}'"
    done[record[key]] = record
    return None
