"""``garen-infer cache merge --out FILE CACHE...``: response caches of separate processes joined into one.

For filesystems whose file locks cannot be trusted across hosts, each shard writes its own cache file
(``--cache cache/shard-$I.sqlite``); afterwards one process merges them. A key already in ``--out`` keeps its
answer: with deterministic models both answers are the same, and with sampling the first one is what later runs
were served. How many such keys held another answer is reported, since it means the models were not deterministic.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from garen_infer.errors import GarenError
from garen_infer.llm.cache import ResponseCache

CHUNK = 2000


@dataclass
class MergeCount:
    added: int = 0
    present: int = 0  # already there with the same answer
    differing: int = 0  # already there with another answer (kept)


def merge_caches(out: str | Path, sources: list[str | Path]) -> MergeCount:
    target = ResponseCache(out)
    count = MergeCount()
    for source in map(Path, sources):
        if source.resolve() == target.path.resolve():
            raise GarenError(f"{source}: is the --out cache itself; name the other caches")
        if not source.is_file():
            raise GarenError(f"{source}: no such cache file")
        try:
            db = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True, timeout=60)  # as_uri escapes # ? %
            rows = db.execute("SELECT key, value FROM responses")
            while batch := rows.fetchmany(CHUNK):
                _add(target, dict(batch), count)
            db.close()
        except sqlite3.DatabaseError as err:
            raise GarenError(f"{source}: not a response cache ({err})") from None
    return count


def _add(target: ResponseCache, rows: dict[str, str], count: MergeCount) -> None:
    existing = target.get_many(list(rows))
    target.put_many({k: json.loads(v) for k, v in rows.items() if k not in existing})
    same = sum(1 for k, v in existing.items() if v == json.loads(rows[k]))
    count.added += len(rows) - len(existing)
    count.present += same
    count.differing += len(existing) - same
