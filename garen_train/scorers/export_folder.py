"""Writing an export folder: where it may go, weights digest and manifest.json (what garen_infer.llm.exported_models
reads)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from garen_infer.llm.exported_models import MANIFEST, weights_digest
from garen_infer.storage.atomic import write_json
from garen_infer.storage.folder_kinds import refuse_unowned


def export_target(out: str | Path) -> Path:
    """The folder ``--out`` names, resolved. An export replaces its folder as a whole, so a folder that holds another
    command's output, or any file that no export wrote (a checkpoint, say), is refused rather than deleted."""
    refuse_unowned(out, "export folder")
    return Path(out).resolve()


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
