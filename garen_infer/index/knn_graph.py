"""The exact k-NN corpus graph (GAREN App. A: k=16, exact cosine) and a dense first stage, both with faiss.

Stored in pyterrier_adaptive's ``np_topk`` layout so other tools can read it: ``edges.u32.np`` (n x k neighbour
rows, row-major uint32), ``weights.f16.np`` (cosines), ``pt_meta.json``. Rows with fewer than k neighbours are
padded with self-loops of weight 0, as pyterrier does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from garen_infer.index.atomic import atomic_path


def flat_ip_index(vectors: np.ndarray):
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index


@dataclass
class KnnGraph:
    neighbours: np.ndarray  # (n, k) uint32 rows
    weights: np.ndarray  # (n, k) float16 cosines

    @property
    def k(self) -> int:
        return self.neighbours.shape[1]

    def of(self, row: int) -> list[int]:
        """Neighbours of a document row, best first, without self-loop padding."""
        return [int(n) for n in self.neighbours[row] if n != row]

    @classmethod
    def build(cls, vectors: np.ndarray, k: int, batch: int = 4096) -> "KnnGraph":
        n = len(vectors)
        index = flat_ip_index(vectors)
        take = min(k + 1, n)  # +1: a document is its own nearest neighbour
        neighbours = np.repeat(np.arange(n, dtype=np.uint32)[:, None], k, axis=1)
        weights = np.zeros((n, k), dtype=np.float16)
        for start in tqdm(range(0, n, batch), desc="kNN graph", unit="batch"):
            sims, ids = index.search(vectors[start : start + batch], take)
            for offset, (row_sims, row_ids) in enumerate(zip(sims, ids)):
                row = start + offset
                keep = [(i, s) for i, s in zip(row_ids, row_sims) if i != row and i >= 0][:k]
                for col, (i, s) in enumerate(keep):
                    neighbours[row, col], weights[row, col] = i, s
        return cls(neighbours, weights)

    def save(self, folder: Path) -> None:
        with atomic_path(folder) as tmp:
            tmp.mkdir()
            self.neighbours.astype(np.uint32).tofile(tmp / "edges.u32.np")
            self.weights.astype(np.float16).tofile(tmp / "weights.f16.np")
            meta = {"type": "corpus_graph", "format": "np_topk", "doc_count": int(len(self.neighbours)), "k": int(self.k)}
            (tmp / "pt_meta.json").write_text(json.dumps(meta))

    @classmethod
    def load(cls, folder: Path) -> "KnnGraph":
        meta = json.loads((folder / "pt_meta.json").read_text())
        n, k = meta["doc_count"], meta["k"]
        neighbours = np.fromfile(folder / "edges.u32.np", dtype=np.uint32).reshape(n, k)
        weights = np.fromfile(folder / "weights.f16.np", dtype=np.float16).reshape(n, k)
        return cls(neighbours, weights)
