"""Append-only JSONL logs of finished work (a run's queries, an index's group summaries).

Each record is one line, flushed when written; a process killed mid-write leaves at most one torn last line,
which reading cuts off so the next append starts clean.
"""

from __future__ import annotations

import json
from pathlib import Path


def read_finished(path: Path, key: str) -> dict:
    """Records by ``record[key]``; a torn or unreadable tail is truncated away."""
    done: dict = {}
    if not path.exists():
        return done
    good_bytes = 0
    with open(path, "rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                break
            try:
                record = json.loads(raw)
                done[record[key]] = record
            except (json.JSONDecodeError, KeyError, TypeError):
                break
            good_bytes += len(raw)
    if good_bytes != path.stat().st_size:
        with open(path, "r+b") as handle:
            handle.truncate(good_bytes)
    return done
