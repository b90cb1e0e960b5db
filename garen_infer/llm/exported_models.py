"""What garen_infer reads of a folder that ``garen-train export`` wrote: its ``manifest.json``.

Backends put the manifest's weights digest into their id, so the response cache never answers for an older
export that was saved under the same path (retrain, export again, rerun: fresh scores, not stale ones).
Any other folder, or a hub id, gets an empty tag and an unchanged id.
"""

from __future__ import annotations

import json
from pathlib import Path

MANIFEST = "manifest.json"
KIND = "garen-train export"


def read_manifest(folder: str | Path | None) -> dict | None:
    """The export manifest in ``folder``, or None when there is none (not an export, or not a local folder)."""
    if not folder:
        return None
    path = Path(folder) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("kind") == KIND else None


def weights_tag(folder: str | Path | None) -> str:
    """'@<12 hex digits of the weights' sha256>' for an export, '' otherwise."""
    manifest = read_manifest(folder)
    digest = (manifest or {}).get("weights_sha256")
    return f"@{digest[:12]}" if digest else ""
