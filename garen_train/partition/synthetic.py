"""Synthetic corpora with planted groups, written as index folders the soft-partition job reads.

- ``planted_vectors``: random unit vectors around planted centres (the scaling benchmark's corpora; their exact
  k-NN graph is built with faiss like a real index's).
- ``planted_graph``: a stochastic block model with a fixed out-degree (each row: ``k_in`` neighbours from its own
  block, the rest from anywhere), for recovery tests where only the graph carries the groups.
``write_index`` writes what an index built by ``garen-infer index`` holds for these stages (manifest,
doc_ids.json, embeddings.npy, knn_graph/ in np_topk layout), and optionally a groups stage's doc_groups.npy.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

from garen_infer.index import stage_files
from garen_infer.index.folder import DOC_IDS, FORMAT
from garen_infer.index.knn_graph import KnnGraph
from garen_infer.storage.atomic import save_array, write_json


def planted_vectors(
    n: int, n_clusters: int, dim: int = 384, spread: float = 0.6, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors around ``n_clusters`` random centres (noise of norm ~``spread`` per vector) and their labels."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    labels = rng.integers(0, n_clusters, size=n)
    vectors = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 65536):  # bounded temporaries at any size
        part = labels[start : start + 65536]
        noise = rng.normal(size=(len(part), dim)).astype(np.float32) * (spread / np.sqrt(dim))
        vectors[start : start + len(part)] = centres[part] + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors, labels


def planted_graph(n_blocks: int, size: int, k: int, k_in: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """k-NN-shaped rows of a stochastic block model: ``k_in`` of each row's ``k`` neighbours share its block."""
    rng = np.random.default_rng(seed)
    n = n_blocks * size
    labels = np.repeat(np.arange(n_blocks), size)
    rows = np.empty((n, k), dtype=np.uint32)
    for i in range(n):
        block = np.flatnonzero(labels == labels[i])
        inside = rng.choice(block[block != i], size=k_in, replace=False)
        outside = rng.choice(np.setdiff1d(np.arange(n), np.concatenate([block, [i]])), size=k - k_in, replace=False)
        rows[i] = np.concatenate([inside, outside])
    return rows, labels


def write_index(path: str | Path, vectors: np.ndarray, graph: KnnGraph | None = None, k: int = 16,
                groups: np.ndarray | None = None, name: str = "synthetic") -> Path:
    """An index folder with the embeddings and knn_graph stages (the graph built from the vectors unless given)
    and, with ``groups`` (a label per row), a groups stage holding only doc_groups.npy."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    n = len(vectors)
    doc_ids = [f"d{i}" for i in range(n)]
    (path / DOC_IDS).write_text(json.dumps(doc_ids))
    save_array(path / "embeddings.npy", vectors)
    start = time.perf_counter()
    graph = graph if graph is not None else KnnGraph.build(vectors, k)
    graph.save(path / "knn_graph", doc_ids)
    built = time.strftime("%Y-%m-%dT%H:%M:%S")
    stages = {
        "embeddings": stage_files.sealed(path, ("embeddings.npy",), {
            "params": {"model": "synthetic"}, "info": {"dim": int(vectors.shape[1])}, "built": built}),
        "knn_graph": stage_files.sealed(path, ("knn_graph",), {
            "params": {"k": int(graph.k)}, "info": {"seconds": round(time.perf_counter() - start, 2)}, "built": built}),
    }
    if groups is not None:
        (path / "groups").mkdir(exist_ok=True)
        save_array(path / "groups" / "doc_groups.npy", groups.astype(np.int32))
        stages["groups"] = stage_files.sealed(path, ("groups",), {
            "params": {"construction": "planted"}, "info": {"groups": int(groups.max()) + 1}, "built": built})
    fingerprint = "sha256:" + hashlib.sha256(json.dumps([name, n]).encode()).hexdigest()[:32]
    corpus = {"name": name, "fingerprint": fingerprint, "doc_count": n}
    doc_ids_file = stage_files.record(path, (DOC_IDS,))[DOC_IDS]
    write_json(path / "manifest.json", {"format": FORMAT, "corpus": corpus, "doc_ids": doc_ids_file, "stages": stages})
    return path
