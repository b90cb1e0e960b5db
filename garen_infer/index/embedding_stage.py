"""The ``embeddings`` index stage: ``embeddings.npy``, one L2-normalised float32 row per corpus document.

Either encoded here, chunk by chunk, or imported from vectors computed elsewhere (``vectors:``, see
``imported_vectors.py``). Encoding resumes: each chunk of ``chunk_size`` documents is saved (atomically) under
``.embeddings.<digest>.partial/`` as soon as it is encoded, so a build killed mid-stage loses at most one chunk,
and the digest (corpus fingerprint + params) keeps chunks of another corpus or model from being reused. The
chunks are then copied into ``embeddings.npy`` through a memory map: memory stays at one chunk.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from garen_infer.faults import fault_point
from garen_infer.index.atomic import atomic_path, save_array
from garen_infer.index.embeddings import Embedder, EmbeddingParams


def build_embeddings(folder, dataset, params: EmbeddingParams) -> dict:
    start = time.perf_counter()
    if params.vectors:
        from garen_infer.index.imported_vectors import import_vectors

        info = import_vectors(Path(params.vectors), dataset.doc_ids, folder.path / "embeddings.npy")
    else:
        info = _encode(folder.path, [d.full_text for d in dataset.documents], dataset.fingerprint(), params)
    return {**info, "seconds": round(time.perf_counter() - start, 2)}


def _encode(root: Path, texts: list[str], fingerprint: str, params: EmbeddingParams) -> dict:
    digest = hashlib.sha256(json.dumps([fingerprint, asdict(params)], sort_keys=True).encode()).hexdigest()[:12]
    partial = root / f".embeddings.{digest}.partial"
    for stale in root.glob(".embeddings.*.partial"):
        if stale != partial:
            shutil.rmtree(stale, ignore_errors=True)
    partial.mkdir(exist_ok=True)
    starts = range(0, len(texts), params.chunk_size)
    chunk_paths = [partial / f"{i:06d}.npy" for i in range(len(starts))]
    embedder = None
    with tqdm(total=len(texts), desc="embeddings", unit="doc") as bar:
        for path, first in zip(chunk_paths, starts):
            size = min(params.chunk_size, len(texts) - first)
            if not path.exists():  # written atomically: present means complete
                embedder = embedder or Embedder(params)  # no model load when every chunk is saved already
                save_array(path, embedder.encode_documents(texts[first : first + size], show_progress=False))
                fault_point("embeddings:chunk")
            bar.update(size)
    dim = np.load(chunk_paths[0], mmap_mode="r").shape[1] if chunk_paths else 0
    with atomic_path(root / "embeddings.npy") as tmp:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(len(texts), dim))
        for path, first in zip(chunk_paths, starts):
            chunk = np.load(path)
            out[first : first + len(chunk)] = chunk
        out.flush()
        del out
    shutil.rmtree(partial, ignore_errors=True)
    return {"dim": int(dim), "chunks": len(chunk_paths)}
