"""The groups format: how a groups stage is stored on disk, for disjoint partitions (Leiden, k-means, random) and
for overlapping groups (a learned soft partition written by ``garen-train export``).

A stage folder holds:
- ``groups.jsonl``: one line per group, in id order: {"group", "docs" (document ids), "concept", "summary",
  "summarizer"}; an overlapping stage adds "weights" (each listed document's membership). A document of several
  groups is listed under each of them.
- ``doc_groups.npy``: int32, one group per corpus row (Omega(d)): its only group, or for an overlapping stage its
  primary group (the highest membership). Code that knows only disjoint groups reads a disjoint stage exactly as
  before; on an overlapping stage it sees each document under its primary group in this file.
- ``doc_memberships.npy`` (overlapping stages only): int32 (n, cap), every group of each row, best first, padded
  with -1; column 0 equals ``doc_groups.npy``. ``doc_membership_weights.npy``: float32 (n, cap), the memberships.
- ``stats.json``: group count and min/max/mean size (the shape of GAREN App. F); an overlapping stage adds
  ``overlap_rate`` (share of documents in more than one group) and ``memberships_per_doc``.
A disjoint stage writes none of the files or fields that only overlapping stages have.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from garen_infer.errors import GarenError
from garen_infer.index.file_guard import reading
from garen_infer.index.grouping.partition import group_stats
from garen_infer.index.grouping.summaries import group_text
from garen_infer.storage.atomic import atomic_path

MEMBERSHIPS, WEIGHTS = "doc_memberships.npy", "doc_membership_weights.npy"


@dataclass
class Groups:
    doc_group: list[int]  # row -> its group (Omega); for overlapping groups the primary one
    members: list[list[int]]  # group id -> rows
    concepts: list[str]
    summaries: list[str]
    doc_groups: list[tuple[int, ...]] | None = None  # row -> all its groups, primary first; None: disjoint

    def __post_init__(self):
        if self.doc_groups is None:
            self.doc_groups = [(g,) for g in self.doc_group]

    @cached_property
    def texts(self) -> list[str]:
        return [group_text(c, s) for c, s in zip(self.concepts, self.summaries)]

    @property
    def overlapping(self) -> bool:
        assert self.doc_groups is not None  # filled in by __post_init__
        return any(len(gs) > 1 for gs in self.doc_groups)

    @classmethod
    def load(cls, folder: Path, doc_index: dict[str, int]) -> Groups:
        members, concepts, summaries = [], [], []
        path = folder / "groups.jsonl"
        with open(path, "rb") as handle:
            for line_no, line in enumerate(handle, start=1):
                with reading(f"{path}, line {line_no}"):
                    docs, concept, summary = _group_record(json.loads(line), doc_index)
                members.append(docs)
                concepts.append(concept)
                summaries.append(summary)
        doc_groups = None
        if (folder / MEMBERSHIPS).is_file():
            with reading(folder / MEMBERSHIPS):
                doc_groups = [tuple(int(g) for g in row if g >= 0) for row in np.load(folder / MEMBERSHIPS)]
        with reading(folder / "doc_groups.npy"):
            doc_group = np.load(folder / "doc_groups.npy").tolist()
        return cls(doc_group, members, concepts, summaries, doc_groups)


def _group_record(record, doc_index: dict[str, int]) -> tuple[list[int], str, str]:
    """One line of groups.jsonl as (rows, concept, summary); a KeyError or TypeError names a damaged line."""
    concept, summary = record["concept"], record["summary"]
    if not isinstance(concept, str) or not isinstance(summary, str):
        raise TypeError("concept and summary must be text")
    return [doc_index[d] for d in record["docs"]], concept, summary


def doc_memberships(
    n_docs: int, groups: list[list[int]], weights: list[list[float]] | None
) -> list[list[tuple[int, float]]]:
    """Each row's (group, weight) pairs, best first (ties: lower group id); disjoint groups weigh 1."""
    out: list[list[tuple[int, float]]] = [[] for _ in range(n_docs)]
    for g, rows in enumerate(groups):
        for i, row in enumerate(rows):
            out[row].append((g, 1.0 if weights is None else float(weights[g][i])))
    for row, pairs in enumerate(out):
        if not pairs:
            raise GarenError(f"corpus row {row} belongs to no group: every document needs at least one")
        pairs.sort(key=lambda p: (-p[1], p[0]))
    return out


def write_groups(path: Path, doc_ids: list[str], groups: list[list[int]], records: list[dict],
                 weights: list[list[float]] | None = None) -> dict:
    """Write a groups stage folder atomically and return its stats. ``records`` hold each group's concept, summary
    and summarizer; ``weights`` are the listed rows' memberships, per group. Groups in which no row has a second
    group are written in the disjoint format, weights or not."""
    memberships = doc_memberships(len(doc_ids), groups, weights)
    overlapping = any(len(pairs) > 1 for pairs in memberships)
    with atomic_path(path) as tmp:
        tmp.mkdir()
        np.save(tmp / "doc_groups.npy", np.array([pairs[0][0] for pairs in memberships], dtype=np.int32))
        with open(tmp / "groups.jsonl", "w", encoding="utf-8") as handle:
            for g, (rows, record) in enumerate(zip(groups, records)):
                line = {"group": g, "docs": [doc_ids[r] for r in rows], "concept": record["concept"],
                        "summary": record["summary"], "summarizer": record["summarizer"]}
                if overlapping:
                    assert weights is not None  # a row in two groups has weights
                    line["weights"] = [round(float(w), 4) for w in weights[g]]
                handle.write(json.dumps(line, ensure_ascii=False) + "\n")
        stats = group_stats(groups)
        if overlapping:
            cap = max(len(pairs) for pairs in memberships)
            ids = np.full((len(doc_ids), cap), -1, dtype=np.int32)
            values = np.zeros((len(doc_ids), cap), dtype=np.float32)
            for row, pairs in enumerate(memberships):
                ids[row, : len(pairs)] = [g for g, _ in pairs]
                values[row, : len(pairs)] = [w for _, w in pairs]
            np.save(tmp / MEMBERSHIPS, ids)
            np.save(tmp / WEIGHTS, values)
            counts = np.array([len(pairs) for pairs in memberships])
            stats.update(overlap_rate=round(float((counts > 1).mean()), 4),
                         memberships_per_doc=round(float(counts.mean()), 4))
        (tmp / "stats.json").write_text(json.dumps(stats, indent=2))
    return stats
