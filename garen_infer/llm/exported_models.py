"""What garen_infer reads of a folder that ``garen-train export`` wrote: its ``manifest.json``.

Backends put the manifest's weights digest into their id, so the response cache never answers for an older
export that was saved under the same path (retrain, export again, rerun: fresh scores, not stale ones).
The digest is checked against the weight files themselves when a backend loads them: weights replaced after the
export (a copied-over ``model.safetensors``) are refused rather than served the old model's cached answers.
Hashing reads the weights once per process (sha256 runs at a few hundred MB/s to GB/s per core: seconds for a
0.6B model, up to a minute for an 8B one on a slow CPU); a file whose name, size, inode, mtime and ctime are
unchanged (any write or rename changes ctime) is not hashed again in the same process. Any other folder, or a hub
id, gets an empty tag and an unchanged id.

A trained yes/no scorer's manifest also says how it was prompted (``scoring``: layout, instruction, assistant
prefix, prompt length); inference prompts it the same way and refuses a role spec that says otherwise.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from garen_infer.errors import GarenError
from garen_infer.storage.folder_kinds import EXPORT_KIND as KIND

MANIFEST = "manifest.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin")

_digests: dict[tuple, str] = {}  # (folder, its weight files' identities) -> their digest, in this process


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


def weight_files(folder: str | Path) -> list[Path]:
    return sorted(p for p in Path(folder).iterdir() if p.suffix in WEIGHT_SUFFIXES)


def weights_digest(folder: str | Path) -> str:
    """sha256 over the folder's weight files (names and bytes, in name order)."""
    digest = hashlib.sha256()
    for path in weight_files(folder):
        digest.update(path.name.encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def current_digest(folder: str | Path) -> str:
    """``weights_digest`` of the files as they are now, hashed again only when a file's identity changed."""
    identity = (
        str(Path(folder).resolve()),
        tuple(
            (p.name, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino)
            for p in weight_files(folder)
            for s in [p.stat()]
        ),
    )
    if identity not in _digests:
        _digests[identity] = weights_digest(folder)
    return _digests[identity]


TRAINED_FORMATS = ("peft-adapter", "hf-merged")  # the parts that hold trained weights (not the untouched base)
SCORING_KEYS = ("prompt_text", "instruction", "assistant_prefix", "max_length")  # how the export was prompted


def trained_scoring(spec: dict) -> tuple[str, dict] | None:
    """(folder, how it was prompted in training) when the spec's adapter (``lora``) or ``model`` is a trained part of
    a ``garen-train export``; None otherwise."""
    for folder in (spec.get("lora"), spec.get("model")):
        manifest = read_manifest(folder)
        if manifest and manifest.get("format") in TRAINED_FORMATS and isinstance(manifest.get("scoring"), dict):
            missing = [key for key in SCORING_KEYS if key not in manifest["scoring"]]
            if missing:
                raise GarenError(f"{folder}: its {MANIFEST} does not say how it was prompted (no "
                                 f"scoring.{missing[0]}); export the checkpoint again with 'garen-train export'")
            return str(folder), manifest["scoring"]
    return None


def trained_prompt_length(model: str, lora: str | None) -> int | None:
    """The prompt length a trained export was trained with (its prompts were cut to it), or None."""
    trained = trained_scoring({"model": model, "lora": lora})
    return trained[1].get("max_length") if trained else None


def weights_tag(folder: str | Path | None) -> str:
    """'@<12 hex digits of the weights' sha256>' for an export, '' otherwise. Refuses an export whose weight
    files are no longer the ones its manifest records."""
    manifest = read_manifest(folder)
    recorded = (manifest or {}).get("weights_sha256")
    if not recorded:
        return ""
    assert folder is not None  # the manifest came from it
    actual = current_digest(folder)
    if actual != recorded:
        raise GarenError(f"{folder}: its weight files are not the ones its {MANIFEST} records (sha256 {actual[:12]}, "
                         f"exported as {recorded[:12]}): they were replaced after 'garen-train export'; export again "
                         f"rather than copy weights over an export")
    return f"@{recorded[:12]}"
