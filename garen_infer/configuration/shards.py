"""Shards: one run's judged queries split over several processes (``--shard i/n``), each an ordinary run folder.

A query's shard depends on its id alone, not on where it stands in the queries file: the ids are ordered by a hash
of each id and dealt out in turn, so every shard gets the same number of queries give or take one, reordering the
file moves no query, and every process that reads the same queries computes the same split without talking to
the others. Shards are numbered 1..n, as a Slurm array ``--array=1-n`` hands them out.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from garen_infer.errors import GarenError


@dataclass(frozen=True)
class Shard:
    index: int  # 1..count
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def as_config(self) -> dict:
        return {"index": self.index, "count": self.count}

    def select(self, queries: list, what: str = "judged queries") -> list:
        """This shard's queries, in the order given."""
        if self.count > len(queries):
            raise GarenError(f"--shard {self}: {len(queries)} {what} cannot fill {self.count} shards; use at "
                             f"most {len(queries)}")
        mine = set(assign([q.id for q in queries], self.count)[self.index])
        return [q for q in queries if q.id in mine]


def parse_shard(text: str) -> Shard:
    """``"2/8"`` -> Shard(2, 8); anything else is one line saying what is expected."""
    index, sep, count = str(text).partition("/")
    try:
        shard = Shard(int(index), int(count))
    except ValueError:
        shard = None
    if not sep or shard is None or shard.count < 1 or not 1 <= shard.index <= shard.count:
        raise GarenError(f"--shard '{text}': expected I/N with 1 <= I <= N, e.g. 1/4 for the first of four shards")
    return shard


def assign(ids: list[str], count: int) -> dict[int, list[str]]:
    """Shard number -> its query ids: ids ordered by SHA-256 of the id (ties, which need equal ids, cannot
    happen), then dealt to shards 1, 2, ..., count, 1, 2, ... in that order."""
    ordered = sorted(dict.fromkeys(ids), key=lambda qid: (hashlib.sha256(qid.encode("utf-8")).hexdigest(), qid))
    shards: dict[int, list[str]] = {k: [] for k in range(1, count + 1)}
    for position, qid in enumerate(ordered):
        shards[position % count + 1].append(qid)
    return shards
