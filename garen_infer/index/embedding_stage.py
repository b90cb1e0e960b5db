"""The ``embeddings`` index stage: ``embeddings.npy``, one L2-normalised float32 row per corpus document; and
``first_stage_embeddings`` (``first_stage_embeddings.npy``), a dense first stage's own vectors when its model
is not the graph's (ReasonIR-8B for GAREN Table 4 over a Qwen3-Embedding graph).

Either encoded here, chunk by chunk, or imported from vectors computed elsewhere (``vectors:``, see
``imported_vectors.py``). Encoding resumes: each chunk of ``chunk_size`` documents is saved (atomically) under
``.embeddings.<digest>.partial/`` as soon as it is encoded, so a build killed mid-stage loses at most one chunk,
and the digest (corpus fingerprint + the params that change the vectors) keeps chunks of another corpus or model
from being reused. A chunk's name says which rows it holds, so a rerun with a smaller batch or chunk size (after
running out of memory) keeps every finished chunk. The chunks are then copied into ``embeddings.npy`` through a
memory map whose blocks are allocated first (a full disk is one error line, not a SIGBUS): memory stays at one
chunk.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from garen_infer.llm.embeddings import Embedder, EmbeddingParams
from garen_infer.settings import identity
from garen_infer.storage.atomic import allocated_npy, atomic_path, save_array
from garen_infer.storage.faults import fault_point

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.index.open_index import OpenIndex


def build_embeddings(folder: OpenIndex, dataset: Dataset, params: EmbeddingParams, name: str = "embeddings") -> dict:
    start = time.perf_counter()
    if params.vectors:
        from garen_infer.index.imported_vectors import import_vectors

        info = import_vectors(Path(params.vectors), dataset.doc_ids, folder.path / f"{name}.npy")
    else:
        texts = [d.full_text for d in dataset.documents]
        info = _encode(folder.path, texts, dataset.fingerprint(), params, name)
    return {**info, "seconds": round(time.perf_counter() - start, 2)}


def build_first_stage_embeddings(folder: OpenIndex, dataset: Dataset, params: EmbeddingParams) -> dict:
    return build_embeddings(folder, dataset, params, "first_stage_embeddings")


def _encode(root: Path, texts: list[str], fingerprint: str, params: EmbeddingParams, name: str) -> dict:
    # chunks of another corpus or model are never reused; another device, batch or chunk size reuses them all
    digest = hashlib.sha256(
        json.dumps([fingerprint, identity(EmbeddingParams, asdict(params))], sort_keys=True).encode()
    ).hexdigest()[:12]
    partial = root / f".{name}.{digest}.partial"
    for stale in root.glob(f".{name}.*.partial"):
        if stale != partial:
            shutil.rmtree(stale, ignore_errors=True)
    partial.mkdir(exist_ok=True)
    saved = _saved_chunks(partial)
    chunks: list[tuple[int, Path]] = []
    embedder = None
    with tqdm(total=len(texts), desc="embeddings", unit="doc") as bar:
        first = 0
        while first < len(texts):
            if first in saved:  # written atomically: present means complete
                path, size = saved[first]
            else:
                following = [start for start in saved if start > first]
                size = min(params.chunk_size, len(texts) - first, *(start - first for start in following))
                path = partial / _chunk_name(first, size)
                embedder = embedder or Embedder(params)  # no model load when every chunk is saved already
                save_array(path, embedder.encode_documents(texts[first : first + size], show_progress=False))
                fault_point("embeddings:chunk")
            chunks.append((first, path))
            bar.update(size)
            first += size
    dim = np.load(chunks[0][1], mmap_mode="r").shape[1] if chunks else 0
    with atomic_path(root / f"{name}.npy") as tmp:
        out = allocated_npy(tmp, (len(texts), dim))
        for first, path in chunks:
            chunk = np.load(path)
            out[first : first + len(chunk)] = chunk
        out.flush()
        del out
    shutil.rmtree(partial, ignore_errors=True)
    return {"dim": int(dim), "chunks": len(chunks)}


def _chunk_name(first: int, size: int) -> str:
    return f"rows-{first:09d}-{size:09d}.npy"  # the rows it holds: chunks survive a change of chunk_size


def _saved_chunks(partial: Path) -> dict[int, tuple[Path, int]]:
    """First row -> (file, rows) of every chunk saved by an earlier, interrupted build."""
    saved = {}
    for path in partial.glob("rows-*-*.npy"):
        _, first, size = path.stem.split("-")
        saved[int(first)] = (path, int(size))
    return saved
