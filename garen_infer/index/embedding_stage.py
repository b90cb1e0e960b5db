"""The ``embeddings`` index stage: ``embeddings.npy``, one L2-normalised float32 row per corpus document; and
``first_stage_embeddings`` (``first_stage_embeddings.npy``), a dense first stage's own vectors when its model
is not the graph's (ReasonIR-8B for GAREN Table 4 over a Qwen3-Embedding graph).

Either encoded here, chunk by chunk, or imported from vectors computed elsewhere (``vectors:``, see
``imported_vectors.py``). A chunk of ``chunk_size`` documents is encoded in batches of ``batch_size``, longest
documents first (a batch pads to lengths near its own), with a line on stderr after each batch: documents done,
documents/s and ETA. Encoding resumes: each batch is saved (atomically) under
``.embeddings.<digest>.partial/rows-<first>-<size>.batch-<batch_size>/`` as it is encoded, and a finished chunk as one
file, so a build killed or interrupted mid-stage loses at most one batch; a rerun encodes the same batches of the
same chunks, so its ``embeddings.npy`` is byte for byte that of a build never interrupted. The digest (corpus
fingerprint + the params that change the vectors) keeps chunks of another corpus or model from being reused, and
each saved file's name carries the digest of its bytes: a file that does not load or match is reported in one
line and encoded again, never trusted. A chunk's name says which rows it holds, so a rerun with a smaller batch
or chunk size (after running out of memory) keeps every finished chunk. The chunks are then copied into
``embeddings.npy`` through a
memory map whose blocks are allocated first (a full disk is one error line, not a SIGBUS): memory stays at one
chunk.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from garen_infer.index.progress import RateLine
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
    saved = _saved_chunks(partial, name)
    work = _Work(texts, params, RateLine(name, len(texts)), name)
    chunks: list[tuple[int, Path]] = []
    first = 0
    try:
        while first < len(texts):
            if first in saved:
                path, size = saved[first]
                work.line.skip(size)
            else:
                following = [start for start in saved if start > first]
                size = min(params.chunk_size, len(texts) - first, *(start - first for start in following))
                path = work.chunk(partial, first, size)
            chunks.append((first, path))
            first += size
    finally:
        work.line.close()
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


class _Work:
    """The encoding of one stage's chunks, batch by batch: the model is loaded at the first batch that is not
    saved already, and each batch is saved as it is encoded, so an interrupt loses at most one batch."""

    def __init__(self, texts: list[str], params: EmbeddingParams, line: RateLine, name: str):
        self.texts, self.params, self.line, self.name = texts, params, line, name
        self.embedder: Embedder | None = None

    def _load(self) -> Embedder:
        p = self.params
        how = " ".join(x for x in (p.backend, p.quantization, p.precision if p.backend == "openvino" else "") if x)
        self.line.note(f"loading {p.model} ({how}, {p.device})")
        embedder = Embedder(p)
        self.line.begin()
        return embedder

    def chunk(self, partial: Path, first: int, size: int) -> Path:
        """Encode rows ``first`` to ``first + size`` into one saved chunk file and return its path."""
        texts = self.texts[first : first + size]
        # longest first, as sentence-transformers orders a call: a batch pads to lengths near its own
        order = sorted(range(size), key=lambda i: -len(texts[i]))
        batch = self.params.batch_size
        stem = _chunk_name(first, size).removesuffix(".npy")
        folder = partial / f"{stem}.batch-{batch}"  # another batch size: other batches
        for other in partial.glob(f"{stem}.batch-*"):
            if other != folder:
                shutil.rmtree(other, ignore_errors=True)
        folder.mkdir(exist_ok=True)
        saved = _saved_batches(folder, self.name, first)
        vectors: np.ndarray | None = None
        for number, start in enumerate(range(0, size, batch)):
            rows = order[start : start + batch]
            if number in saved:
                encoded = saved[number]
                self.line.skip(len(rows))
            else:
                self.embedder = self.embedder or self._load()  # no model load when all is saved
                encoded = self.embedder.encode_documents([texts[i] for i in rows], show_progress=False)
                save_array(folder / _checked_name(f"batch-{number:06d}", encoded), encoded)
                fault_point("embeddings:batch")
                self.line.update(len(rows))
            if vectors is None:
                vectors = np.zeros((size, encoded.shape[1]), np.float32)
            vectors[rows] = encoded
        assert vectors is not None  # size >= 1
        path = partial / _checked_name(stem, vectors)
        save_array(path, vectors)
        fault_point("embeddings:chunk")
        shutil.rmtree(folder, ignore_errors=True)
        return path


def _chunk_name(first: int, size: int) -> str:
    return f"rows-{first:09d}-{size:09d}.npy"  # the rows it holds: chunks survive a change of chunk_size


def _checked_name(stem: str, array: np.ndarray) -> str:
    """``stem`` and the digest of ``array``'s bytes: a file read back is trusted only if its bytes still match."""
    return f"{stem}-{_digest(array)}.npy"


def _digest(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array, dtype=np.float32).tobytes()).hexdigest()[:16]


def _saved_chunks(partial: Path, name: str) -> dict[int, tuple[Path, int]]:
    """First row -> (file, rows) of every chunk saved by an earlier, interrupted build whose bytes check out; a
    damaged one is reported in one line, removed and encoded again."""
    saved = {}
    for path in sorted(partial.glob("rows-*-*-*.npy")):
        _, first, size, _ = path.stem.split("-")
        if _checked(path, int(size),
                    f"{name}: saved chunk of rows {int(first)}-{int(first) + int(size) - 1}") is not None:
            saved[int(first)] = (path, int(size))
    return saved


def _saved_batches(folder: Path, name: str, first: int) -> dict[int, np.ndarray]:
    """Batch number -> vectors of the batches of an unfinished chunk that an interrupted build saved."""
    saved = {}
    for path in sorted(folder.glob("batch-*-*.npy")):
        number = int(path.stem.split("-")[1])
        vectors = _checked(path, None, f"{name}: saved batch {number} of the chunk from row {first}")
        if vectors is not None:
            saved[number] = vectors
    return saved


def _checked(path: Path, rows: int | None, what: str) -> np.ndarray | None:
    """The vectors in ``path`` if it holds float32 rows (``rows`` of them, when given) whose digest is the one
    in its name; else None, after one line on stderr, with the file removed."""
    problem = None
    try:
        vectors = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        problem = f"unreadable ({str(err).splitlines()[0] if str(err) else type(err).__name__})"
    else:
        if vectors.ndim != 2 or vectors.dtype != np.float32 or (rows is not None and len(vectors) != rows):
            problem = f"holds {vectors.dtype} of shape {vectors.shape}, not {rows or 'n'} float32 vectors"
        elif _digest(vectors) != path.stem.rsplit("-", 1)[1]:
            problem = "its bytes no longer match the digest in its name"
    if problem is None:
        return vectors
    print(f"[index] {what} is damaged: {problem}; encoding it again", file=sys.stderr)
    path.unlink(missing_ok=True)
    return None
