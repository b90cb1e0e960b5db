"""Writing an export folder: weights digest and manifest.json (what garen_infer.llm.exported_models reads)."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from garen_infer.index.atomic import write_json
from garen_infer.llm.exported_models import MANIFEST

WEIGHT_SUFFIXES = (".safetensors", ".bin")


def weights_digest(folder: Path) -> str:
    """sha256 over the folder's weight files (names and bytes, in name order)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(folder).iterdir() if p.suffix in WEIGHT_SUFFIXES):
        digest.update(path.name.encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def plain(value):
    """JSON-ready copy of hyper-parameters (dataclasses become dicts)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


def write_manifest(folder: Path, manifest: dict) -> dict:
    """Add the weights digest and write manifest.json into ``folder``; returns what was written."""
    manifest = {**plain(manifest), "weights_sha256": weights_digest(folder)}
    write_json(Path(folder) / MANIFEST, manifest)  # atomic: a killed export leaves no half manifest
    return manifest
