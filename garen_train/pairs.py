"""Mined training pairs, as ``garen-train mine`` writes them: a folder with ``groups.jsonl`` (query, group) pairs,
``documents.jsonl`` (query, document) pairs and ``manifest.json``. Each JSONL line is one pair:

    {"qid": str, "query": str, "kind": "group" | "document", "item": str (group or document id),
     "text": str (exactly what the scorer sees), "label": 0 | 1,
     "provenance": "scored" | "unreached_gold" (groups), "judged" | "hard_negative" (documents),
     "iteration": int | null, "rank": int | null (the first-stage rank of a document)}

A training job reads one such file. Pairs are grouped by query, in file order; a bad line is one DataError that
names the file, the line and the field.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from garen_infer.errors import DataError

KINDS = ("group", "document")


@dataclass(frozen=True)
class Pair:
    qid: str
    query: str
    item: str
    text: str
    label: int
    kind: str = "document"
    provenance: str = ""
    rank: int | None = None  # first-stage rank (documents), for the first-stage baseline of validation


@dataclass(frozen=True)
class QueryPairs:
    """Everything mined for one query."""

    qid: str
    query: str
    pairs: tuple[Pair, ...]

    @property
    def positives(self) -> list[Pair]:
        return [p for p in self.pairs if p.label]

    @property
    def negatives(self) -> list[Pair]:
        return [p for p in self.pairs if not p.label]


def _field(row: dict, name: str, kind, path, line: int):
    if name not in row:
        raise DataError(path, "missing", line, name)
    value = row[name]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise DataError(path, f"expected {getattr(kind, '__name__', kind)}, got {type(value).__name__}", line, name)
    return value


def read_pairs(path: str | Path) -> list[QueryPairs]:
    """The pairs of a mined JSONL file, grouped by query (queries and pairs in file order)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "no such pairs file (write one with 'garen-train mine')")
    by_query: dict[str, tuple[str, list[Pair]]] = {}
    with open(path, encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except json.JSONDecodeError as err:
                raise DataError(path, f"not JSON ({err.msg})", number) from None
            if not isinstance(row, dict):
                raise DataError(path, "expected a JSON object", number)
            qid, query = _field(row, "qid", str, path, number), _field(row, "query", str, path, number)
            label = _field(row, "label", int, path, number)
            if label not in (0, 1):
                raise DataError(path, f"must be 0 or 1, got {label}", number, "label")
            kind = row.get("kind", "document")
            if kind not in KINDS:
                raise DataError(path, f"must be one of {', '.join(KINDS)}, got {kind!r}", number, "kind")
            rank = row.get("rank")
            if rank is not None and (not isinstance(rank, int) or isinstance(rank, bool)):
                raise DataError(path, f"expected an int or null, got {type(rank).__name__}", number, "rank")
            pair = Pair(
                qid=qid, query=query, item=str(_field(row, "item", str, path, number)),
                text=_field(row, "text", str, path, number), label=label, kind=kind,
                provenance=str(row.get("provenance") or ""), rank=rank,
            )
            known = by_query.setdefault(qid, (query, []))
            if known[0] != query:
                raise DataError(path, f"query {qid} has two texts", number, "query")
            known[1].append(pair)
    if not by_query:
        raise DataError(path, "no pairs in this file")
    return [QueryPairs(qid, query, tuple(pairs)) for qid, (query, pairs) in by_query.items()]


def file_fingerprint(path: str | Path) -> str:
    """sha256 of the pairs file's bytes: which data a checkpoint was trained on."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def folder_manifest(path: str | Path) -> dict | None:
    """The miner's manifest.json next to a pairs file (index fingerprint, dataset, split, counts), if any."""
    manifest = Path(path).parent / "manifest.json"
    try:
        return json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
