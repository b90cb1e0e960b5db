"""Bring your own embeddings: document vectors computed elsewhere (say Qwen3-Embedding-4B on a GPU, once) become
the ``embeddings`` stage, and every other stage is built from them on any machine.

Accepted files, with their ids (the document id of each row):
- ``X.npy``: a 2-D float array; ids one per line in ``X.ids.txt``, or a JSON list in ``X.ids.json``, or the
  ``doc_ids.json`` beside it (so another index folder's ``embeddings.npy`` works as it is);
- ``X.safetensors``: the tensor ``embeddings`` (or the file's only tensor); ids as a JSON list in the header's
  metadata under ``ids``, or in the same side files.

Checked against the corpus before anything is written: every corpus document has exactly one row (no missing,
extra or duplicate ids), the array is 2-D and floating point, no value is NaN or infinite, no row is zero. Rows are
L2-normalised (inner product = cosine downstream); how many needed it goes into the manifest. The dimension is
checked against the query model when a run first encodes a query (``IndexFolder.embedder``).
Rows are copied in corpus order, a slice at a time, through a memory map: memory stays at one slice.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from garen_infer.errors import DataError
from garen_infer.storage.atomic import allocated_npy, atomic_path

SLICE = 32768  # rows read, checked and copied at a time
NORM_TOLERANCE = 1e-5  # rows whose norm is further from 1 (beyond float32 rounding) are normalised, and counted


def import_vectors(path: Path, doc_ids: list[str], out: Path) -> dict:
    source = _open(path)
    ids = _ids(path, source)
    rows = _corpus_rows(path, ids, doc_ids)
    n, dim = len(doc_ids), source.shape[1]
    renormalised = 0
    with atomic_path(out) as tmp:
        target = allocated_npy(tmp, (n, dim))
        for start in range(0, len(ids), SLICE):
            block = source.rows(start, min(start + SLICE, len(ids)))
            block, fixed = _checked_unit_rows(path, block, ids, start)
            renormalised += fixed
            target[rows[start : start + len(block)]] = block
        target.flush()
        del target
    return {"dim": int(dim), "imported_from": str(path), "sha256": _sha256(path), "renormalised_rows": renormalised}


class _Npy:
    def __init__(self, path: Path):
        try:
            self.array = np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as err:
            raise DataError(path, f"not a readable .npy array ({err})") from None
        self.shape = self.array.shape
        self.metadata: dict[str, str] = {}
        self.dtype, self.floating = str(self.array.dtype), np.issubdtype(self.array.dtype, np.floating)

    def rows(self, start: int, stop: int) -> np.ndarray:
        return np.asarray(self.array[start:stop])


class _Safetensors:
    FLOATS = ("F16", "BF16", "F32", "F64")

    def __init__(self, path: Path):
        from safetensors import SafetensorError, safe_open

        try:
            handle = safe_open(str(path), framework="np")
            names = list(handle.keys())
        except (SafetensorError, OSError) as err:
            raise DataError(path, f"not a readable safetensors file ({err})") from None
        name = "embeddings" if "embeddings" in names else (names[0] if len(names) == 1 else None)
        if name is None:
            raise DataError(path, f"holds tensors {', '.join(names) or '(none)'}; name the vectors 'embeddings'")
        self.dtype = handle.get_slice(name).get_dtype()
        self.floating, self.bfloat16 = self.dtype in self.FLOATS, self.dtype == "BF16"
        if self.bfloat16:  # numpy has no bfloat16: read through torch and widen
            handle = safe_open(str(path), framework="pt")
        self.slice = handle.get_slice(name)
        self.shape, self.metadata = tuple(self.slice.get_shape()), handle.metadata() or {}

    def rows(self, start: int, stop: int) -> np.ndarray:
        block = self.slice[start:stop]
        return block.float().numpy() if self.bfloat16 else np.asarray(block)


def _open(path: Path):
    if not path.is_file():
        raise DataError(path, "no such file (index.embeddings.vectors names document vectors to import)")
    kinds: dict[str, type[_Npy] | type[_Safetensors]] = {".npy": _Npy, ".safetensors": _Safetensors}
    if path.suffix not in kinds:
        raise DataError(path, "expected a .npy or .safetensors file of document vectors")
    source = kinds[path.suffix](path)
    if len(source.shape) != 2 or source.shape[1] == 0:
        raise DataError(path, f"expected a 2-D array (documents x dimensions), got shape {tuple(source.shape)}")
    if not source.floating:
        raise DataError(path, f"expected floating-point vectors, got {source.dtype}")
    return source


def _ids(path: Path, source) -> list[str]:
    txt, js = path.with_name(path.stem + ".ids.txt"), path.with_name(path.stem + ".ids.json")
    if "ids" in source.metadata:
        ids, where = _json_list(path, source.metadata["ids"], "metadata 'ids'"), path
    elif txt.is_file():
        where = txt
        ids = where.read_text(encoding="utf-8").splitlines()
    elif js.is_file():
        where = js
        ids = _json_list(where, where.read_text(encoding="utf-8"), "ids")
    elif (path.parent / "doc_ids.json").is_file():
        where = path.parent / "doc_ids.json"
        ids = _json_list(where, where.read_text(encoding="utf-8"), "ids")
    else:
        raise DataError(path, f"no ids for these vectors: write one id per line to {txt}, a JSON "
                              f"list to {js}, or (safetensors) a JSON list in the metadata 'ids'")
    if len(ids) != source.shape[0]:
        raise DataError(where, f"{len(ids)} ids for {source.shape[0]} vectors in {path}")
    return ids


def _json_list(where: Path, text: str, what: str) -> list[str]:
    try:
        ids = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(where, f"{what}: not valid JSON ({err})") from None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise DataError(where, f"{what}: expected a JSON list of document id strings")
    return ids


def _corpus_rows(path: Path, ids: list[str], doc_ids: list[str]) -> np.ndarray:
    """The corpus row of each vector, after checking that the ids and the corpus match one to one."""
    position: dict[str, int] = {}
    for i, doc_id in enumerate(ids):
        if doc_id in position:
            raise DataError(path, f"id '{doc_id}' has two vectors (rows {position[doc_id]} and {i})")
        position[doc_id] = i
    corpus = set(doc_ids)
    missing = [d for d in doc_ids if d not in position]
    extra = [d for d in ids if d not in corpus]
    if missing or extra:
        problems = []
        if missing:
            problems.append(f"{len(missing)} corpus documents have no vector (e.g. "
                            f"{', '.join(repr(d) for d in missing[:3])})")
        if extra:
            problems.append(f"{len(extra)} vectors belong to no corpus document (e.g. "
                            f"{', '.join(repr(d) for d in extra[:3])})")
        raise DataError(path, "; ".join(problems) + ": embed exactly this corpus")
    row_of = {d: r for r, d in enumerate(doc_ids)}
    return np.array([row_of[d] for d in ids], dtype=np.int64)


def _checked_unit_rows(path: Path, block: np.ndarray, ids: list[str], start: int) -> tuple[np.ndarray, int]:
    block = block.astype(np.float32)
    bad = ~np.isfinite(block).all(axis=1)
    if bad.any():
        i = start + int(np.flatnonzero(bad)[0])
        raise DataError(path, f"the vector of '{ids[i]}' (row {i}) holds NaN or infinite values")
    norms = np.linalg.norm(block, axis=1)
    if (norms == 0).any():
        i = start + int(np.flatnonzero(norms == 0)[0])
        raise DataError(path, f"the vector of '{ids[i]}' (row {i}) is all zeros")
    off = np.abs(norms - 1.0) > NORM_TOLERANCE
    if off.any():
        block[off] /= norms[off, None]
    return block, int(off.sum())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for part in iter(lambda: handle.read(1 << 22), b""):
            digest.update(part)
    return digest.hexdigest()
