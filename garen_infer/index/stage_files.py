"""What each index stage wrote, as recorded in the manifest: every file's size and SHA-256, and a seal over the
stage's entry (its params, its files, what it was made from).

Opening an index checks the cheap part: each file is there with its recorded size, and no recorded params were
edited after the build (the seal). ``garen-infer index --verify`` reads every byte and compares the digests. A
folder of many small files (the corpus as files, one per document) is recorded as one entry, its digest taken
over the names and contents; opening checks that the folder is there, ``--verify`` reads it all.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

BULK_FILES = 64  # a folder holding more files than this is recorded as one entry
BLOCK = 1 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


def record(root: Path, outputs: tuple[str, ...]) -> dict[str, dict]:
    """``{relative path: {"size": bytes, "sha256": hex}}`` for every file under ``outputs`` (files or folders of
    ``root``); a folder of many files is one entry whose path ends in ``/`` and which counts its ``files``."""
    files: dict[str, dict] = {}
    for output in outputs:
        path = root / output
        if path.is_file():
            files[output] = {"size": path.stat().st_size, "sha256": file_sha256(path)}
        elif path.is_dir():
            _record_folder(root, path, files)
    return files


def _record_folder(root: Path, folder: Path, files: dict) -> None:
    children = sorted(folder.iterdir())
    plain = [c for c in children if c.is_file()]
    if len(plain) > BULK_FILES:
        files[f"{folder.relative_to(root).as_posix()}/"] = _bulk(plain)
    else:
        for child in plain:
            files[child.relative_to(root).as_posix()] = {"size": child.stat().st_size, "sha256": file_sha256(child)}
    for child in children:
        if child.is_dir():
            _record_folder(root, child, files)


def _bulk(paths: list[Path]) -> dict:
    digest, size = hashlib.sha256(), 0
    for path in paths:
        length = path.stat().st_size
        digest.update(f"{path.name}\0{length}\0{file_sha256(path)}\n".encode())
        size += length
    return {"files": len(paths), "size": size, "sha256": digest.hexdigest()}


def seal(entry: dict) -> str:
    """The digest of what a stage entry claims (params, files, requires); timings and facts are left out, as two
    builds of the same stage differ only there."""
    claimed = {key: entry.get(key) for key in ("params", "files", "requires")}
    return hashlib.sha256(json.dumps(claimed, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def sealed(root: Path, outputs: tuple[str, ...], entry: dict) -> dict:
    """``entry`` with the files of ``outputs`` and its seal added."""
    entry = {**entry, "files": record(root, outputs)}
    return {**entry, "seal": seal(entry)}


def damage(root: Path, name: str, entry: dict) -> str | None:
    """What is wrong with a stage in its manifest entry and on disk, by the cheap checks (seal, presence, sizes),
    or None."""
    if entry.get("seal") != seal(entry):
        return (
            f"the manifest entry of stage '{name}' was edited after the stage was built (its params or "
            "files no longer match its seal)"
        )
    for rel, recorded in entry["files"].items():
        problem = size_problem(root, rel, recorded)
        if problem:
            return f"{problem} (stage '{name}')"
    return None


def size_problem(root: Path, rel: str, recorded: dict) -> str | None:
    path = root / rel
    if rel.endswith("/"):
        return None if path.is_dir() else f"{rel} is missing"
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return f"{rel} is missing"
    return (
        None
        if size == recorded["size"]
        else f"{rel} has {size} bytes, not the {recorded['size']} it was written with"
    )


def digest_problem(root: Path, rel: str, recorded: dict) -> str | None:
    """Reads the file (or every file of a bulk folder) and compares its digest; None when it matches."""
    problem = size_problem(root, rel, recorded)
    if problem:
        return problem
    path = root / rel
    if rel.endswith("/"):
        found = _bulk(sorted(p for p in path.iterdir() if p.is_file()))
        return (
            None
            if found == {k: recorded[k] for k in ("files", "size", "sha256")}
            else f"{rel} holds other files or contents than it was written with"
        )
    return (
        None
        if file_sha256(path) == recorded["sha256"]
        else f"{rel} has other contents than it was written with (sha256 differs)"
    )
