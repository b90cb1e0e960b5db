"""The mined-pairs folder: what ``garen-train mine`` writes and the training DataModules read.

    groups.jsonl      the navigator's (query, group) pairs
    documents.jsonl   a pointwise reranker's (query, document) pairs
    manifest.json     how they were mined (index fingerprint, dataset and split, preset, counts, timings), the
                      files' line counts and digests, ``purpose``: "training" or "evaluation", and
                      ``manifest_sha256``, a digest of all the rest, so a hand-edited ``purpose`` is not trusted
    traversal/        the GAREN run that was replayed (garen-infer's run folder: config, trace, run.trec, metrics)

Each JSONL line:
    {"qid": str, "query": str, "kind": "group" | "document",
     "item": str            group id (its line in the index's groups stage) or document id,
     "text": str            exactly what the scorer reads: the group's concept and summary as the navigator sees
                            them (``Groups.texts``), or ``Document.full_text``,
     "label": 0 | 1,
     "provenance": "scored" | "unreached_gold" (groups), "judged" | "hard_negative" (documents), "reranker" (either,
     with --labels reranker),
     "iteration": int | null   GAREN iteration that scored the group,
     "rank": int | null        1-based first-stage rank of a document,
     "score": float | null     P(yes) of the navigator that mined it (null with --scores none)}

A folder is trusted only when its manifest exists and the files match it: the manifest is removed before new
files are written and written back last, so an interrupted mine never leaves a folder that reads as finished.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from garen_infer.data.dataset import Query
from garen_infer.errors import GarenError
from garen_infer.storage.atomic import atomic_path, write_json
from garen_infer.storage.folder_kinds import MINED_FORMAT
from garen_train.mining.guard import check_disjoint

FORMAT = f"{MINED_FORMAT}2"  # 2: the manifest's own digest
GROUPS, DOCUMENTS, MANIFEST = "groups.jsonl", "documents.jsonl", "manifest.json"
PURPOSES = ("training", "evaluation")


def write_mined(out: Path, groups: list[dict], documents: list[dict], manifest: dict) -> dict:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)  # until the new manifest lands, the folder reads as unfinished
    files = {name: write_jsonl(out / name, lines) for name, lines in ((GROUPS, groups), (DOCUMENTS, documents))}
    manifest = json.loads(json.dumps({"format": FORMAT, **manifest, "files": files}))  # as it reads back from disk
    manifest["manifest_sha256"] = manifest_digest(manifest)
    write_json(out / MANIFEST, manifest)
    return manifest


def manifest_digest(manifest: dict) -> str:
    """sha256 of everything in the manifest but this digest: its purpose, dataset, guard and the files' digests."""
    body = {key: value for key, value in manifest.items() if key != "manifest_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def write_jsonl(path: Path, lines: list[dict]) -> dict:
    """Stream the lines to a temporary name (a SciFact train mine is ~100k lines), hash them, rename."""
    digest = hashlib.sha256()
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        for line in lines:
            raw = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
            digest.update(raw)
            handle.write(raw)
    return {"lines": len(lines), "sha256": digest.hexdigest()}


@dataclass
class MinedPairs:
    folder: Path
    manifest: dict
    groups: list[dict]
    documents: list[dict]

    @property
    def purpose(self) -> str:
        return self.manifest["purpose"]

    @property
    def name(self) -> str:
        return f"{self.folder} ({self.manifest['dataset']['name']})"

    def queries(self) -> list[Query]:
        seen = {line["qid"]: line["query"] for line in self.groups + self.documents}
        return [Query(qid, text) for qid, text in seen.items()]


def read_mined(folder: str | Path, purpose: str | None = None) -> MinedPairs:
    """Read a mined folder; ``purpose="training"`` refuses pairs mined from an evaluation split."""
    folder = Path(folder)
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise GarenError(f"{folder}: no {MANIFEST}, so not a finished 'garen-train mine' output (if a mine "
                         "was interrupted, run it again)")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if manifest.get("format") != FORMAT:
        raise GarenError(f"{manifest_path}: format {manifest.get('format')!r} is not {FORMAT!r}; mine again "
                         "with this version")
    if manifest.get("manifest_sha256") != manifest_digest(manifest):
        raise GarenError(f"{manifest_path}: edited after mining (its content, 'purpose' included, no longer "
                         f"matches its manifest_sha256); mine again rather than edit it")
    if purpose is not None and purpose not in PURPOSES:
        raise GarenError(f"purpose '{purpose}' is not one of {', '.join(PURPOSES)}")
    if purpose == "training" and manifest["purpose"] != "training":
        raise GarenError(f"{folder}: mined from {manifest['dataset']['name']} with --evaluation; it may "
                         "validate or test a model, never train one")
    lines = {name: read_jsonl(folder / name, expected["sha256"]) for name, expected in manifest["files"].items()}
    return MinedPairs(folder, manifest, lines[GROUPS], lines[DOCUMENTS])


def read_jsonl(path: Path, sha256: str) -> list[dict]:
    digest, raw_lines = hashlib.sha256(), []
    if path.is_file():
        with open(path, "rb") as handle:
            for raw in handle:
                digest.update(raw)
                raw_lines.append(raw)
    if digest.hexdigest() != sha256:
        raise GarenError(f"{path}: does not match {MANIFEST} (changed or truncated after mining); mine again")
    return [json.loads(raw) for raw in raw_lines]


def check_training_data(training: MinedPairs, *held_out: MinedPairs) -> None:
    """Refuse training pairs whose queries (by id or text) are those of the pairs a model is evaluated on."""
    if training.purpose != "training":
        raise GarenError(f"{training.name}: is evaluation data; it cannot train a model")
    check_disjoint(training.queries(), training.name, {h.name: h.queries() for h in held_out})
