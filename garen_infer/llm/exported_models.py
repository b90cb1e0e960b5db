"""What garen_infer reads of a folder that ``garen-train export`` wrote: its ``manifest.json``.

Backends put the manifest's weights digest into their id, so the response cache never answers for an older
export that was saved under the same path (retrain, export again, rerun: fresh scores, not stale ones).
Any other folder, or a hub id, gets an empty tag and an unchanged id.

A trained yes/no scorer's manifest also says how it was prompted (``scoring``: layout, instruction, assistant
prefix, prompt length); inference prompts it the same way and refuses a role spec that says otherwise.
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


TRAINED_FORMATS = ("peft-adapter", "hf-merged")  # the parts that hold trained weights (not the untouched base)
# How exports written before ``prompt_text`` was recorded were prompted: training's layout then.
UNRECORDED_SCORING = {"prompt_text": "plain"}


def trained_scoring(spec: dict) -> tuple[str, dict] | None:
    """(folder, how it was prompted in training) when the spec's adapter (``lora``) or ``model`` is a trained part of
    a ``garen-train export``; None otherwise."""
    for folder in (spec.get("lora"), spec.get("model")):
        manifest = read_manifest(folder)
        if manifest and manifest.get("format") in TRAINED_FORMATS and isinstance(manifest.get("scoring"), dict):
            return str(folder), {**UNRECORDED_SCORING, **manifest["scoring"]}
    return None


def trained_prompt_length(model: str, lora: str | None) -> int | None:
    """The prompt length a trained export was trained with (its prompts were cut to it), or None."""
    trained = trained_scoring({"model": model, "lora": lora})
    return trained[1].get("max_length") if trained else None


def weights_tag(folder: str | Path | None) -> str:
    """'@<12 hex digits of the weights' sha256>' for an export, '' otherwise."""
    manifest = read_manifest(folder)
    digest = (manifest or {}).get("weights_sha256")
    return f"@{digest[:12]}" if digest else ""
