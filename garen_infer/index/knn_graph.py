"""The k-NN corpus graph (GAREN App. A: k=16, exact cosine) and a dense first stage, both with faiss.

Exact search costs n^2 d and stays the default where that is affordable: on a GPU always, on a CPU up to
``exact_max_docs`` documents (200K: about 3 minutes on two cores). Larger corpora (BRIGHT's LeetCode has 413K
documents) use an inverted-file index (faiss IVF-Flat: 4 sqrt(n) lists, ``nprobe`` probed per query), whose recall
against exact search on a seeded sample of rows goes into the manifest. IVF is deterministic: its k-means is
seeded and each query's search is independent of the others.

Stored in pyterrier_adaptive's ``np_topk`` layout so other tools can read it: ``edges.u32.np`` (n x k neighbour
rows, row-major uint32), ``weights.f16.np`` (cosines), ``docnos.npids`` (row <-> document id, an npids lookup) and
``pt_meta.json``; ``pt.Artifact.load(index/knn_graph)`` opens it as pyterrier_adaptive's ``NpTopKCorpusGraph``.
Rows with fewer than k neighbours are padded with self-loops of weight 0, as pyterrier does.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from tqdm.auto import tqdm

from garen_infer.errors import GarenError
from garen_infer.settings import Count, NonNegative, Probability
from garen_infer.storage.atomic import atomic_path
from garen_infer.storage.faults import fault_point


@dataclass(frozen=True)
class KnnGraphParams:
    k: Count = 16  # GAREN App. A: each document linked to its 16 most similar documents (exact cosine)
    search: Literal["auto", "exact", "ivf"] = "auto"  # auto: exact on a GPU or up to exact_max_docs, else IVF
    exact_max_docs: Count = 200_000
    nlist: NonNegative = 0  # IVF lists; 0 = 4 sqrt(n), faiss's rule of thumb
    nprobe: Count = 16  # IVF lists searched per document, doubled until the sample's recall reaches recall_target
    recall_target: Probability = 0.95
    recall_sample: NonNegative = 1000  # rows whose exact neighbours measure IVF's recall (0 = no check, no tuning)
    # cuda: faiss on the first GPU (the `gpu` extra: faiss-gpu). Part of the stage's identity, unlike other devices:
    # with search "auto" a GPU searches exactly where the CPU would use IVF, and a GPU probes at most 2048 lists
    device: Literal["cpu", "cuda"] = "cpu"
    seed: int = 42  # IVF k-means and the recall sample


def faiss_module():
    """faiss, from whichever build is installed (faiss-cpu or faiss-gpu: the `cpu` and `gpu` extras)."""
    try:
        import faiss
    except ImportError:
        raise GarenError("faiss is not installed: pip install 'garen[cpu]' (faiss-cpu), or on a CUDA machine "
                         "'garen[gpu]' (faiss-gpu; never both, they install the same module)") from None
    return faiss


def flat_ip_index(vectors: np.ndarray, device: str = "cpu"):
    faiss = faiss_module()

    index = faiss.IndexFlatIP(vectors.shape[1])
    index = _on_device(index, device)
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def _on_device(index, device: str):
    if device == "cpu":
        return index
    faiss = faiss_module()

    if not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() == 0:
        raise GarenError("knn_graph device 'cuda' needs faiss built with GPU support and a visible GPU: "
                         "pip uninstall faiss-cpu && pip install 'garen[gpu]' (faiss-gpu), or set device: cpu")
    resources = faiss.StandardGpuResources()
    gpu_index = faiss.index_cpu_to_gpu(resources, 0, index)
    gpu_index.garen_resources = resources  # the index needs them alive as long as it is
    return gpu_index


def ivf_index(vectors: np.ndarray, nlist: int, nprobe: int, seed: int, device: str = "cpu"):
    """An IVF-Flat inner-product index over ``vectors``, trained with a seeded k-means."""
    faiss = faiss_module()

    dim = vectors.shape[1]
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = seed
    index.cp.niter = 10  # k-means rounds; a coarser clustering costs a larger nprobe, which the recall check sets
    index.cp.max_points_per_centroid = 64  # train on <= 64 points a list: k-means stays linear in n
    index.train(_training_sample(vectors, nlist * 64, seed))  # on the CPU: the same lists whatever the device
    index = _on_device(index, device)
    for start in range(0, len(vectors), 65536):
        index.add(np.ascontiguousarray(vectors[start : start + 65536], dtype=np.float32))
    _set_nprobe(index, nprobe, device)
    return index


def _training_sample(vectors: np.ndarray, size: int, seed: int) -> np.ndarray:
    if len(vectors) <= size:
        return np.ascontiguousarray(vectors, dtype=np.float32)
    rows = np.sort(np.random.default_rng(seed).choice(len(vectors), size, replace=False))
    return np.ascontiguousarray(vectors[rows], dtype=np.float32)


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
    def build(cls, vectors: np.ndarray, k: int, batch: int = 16384) -> KnnGraph:
        """The exact graph (GAREN App. A)."""
        return cls.search_all(flat_ip_index(vectors), vectors, k, batch)

    @classmethod
    def search_all(cls, index, vectors: np.ndarray, k: int, batch: int = 16384) -> KnnGraph:
        """Each row's k nearest other rows by ``index``, searched ``batch`` rows at a time (bounded memory)."""
        n = len(vectors)
        neighbours = np.empty((n, k), dtype=np.uint32)
        weights = np.empty((n, k), dtype=np.float16)
        take = min(k + 1, n)  # +1: a document is its own nearest neighbour
        for start in tqdm(range(0, n, batch), desc="kNN graph", unit="batch", disable=n <= batch):
            rows = np.arange(start, min(start + batch, n))
            sims, ids = index.search(np.ascontiguousarray(vectors[start : start + batch], dtype=np.float32), take)
            neighbours[rows], weights[rows] = _without_self(ids, sims, rows, k)
            fault_point("knn_graph:batch")
        return cls(neighbours, weights)

    def save(self, folder: Path, doc_ids: list[str]) -> None:
        """Write the graph; ``doc_ids`` (the corpus order of its rows) become its ``docnos.npids``."""
        if len(doc_ids) != len(self.neighbours):
            raise GarenError(f"{folder}: a graph of {len(self.neighbours)} rows cannot be saved with "
                             f"{len(doc_ids)} document ids")
        with atomic_path(folder) as tmp:
            tmp.mkdir()
            self.neighbours.astype(np.uint32).tofile(tmp / "edges.u32.np")
            self.weights.astype(np.float16).tofile(tmp / "weights.f16.np")
            write_docnos(tmp / DOCNOS, doc_ids)
            meta = {"type": "corpus_graph", "format": "np_topk", "package_hint": "pyterrier-adaptive",
                    "doc_count": int(len(self.neighbours)), "k": int(self.k)}
            (tmp / "pt_meta.json").write_text(json.dumps(meta))

    @classmethod
    def load(cls, folder: Path) -> KnnGraph:
        meta = json.loads((folder / "pt_meta.json").read_text())
        n, k = meta["doc_count"], meta["k"]
        neighbours = np.fromfile(folder / "edges.u32.np", dtype=np.uint32).reshape(n, k)
        weights = np.fromfile(folder / "weights.f16.np", dtype=np.float16).reshape(n, k)
        return cls(neighbours, weights)


DOCNOS = "docnos.npids"


def write_docnos(path: Path, doc_ids: list[str]) -> None:
    """The npids lookup pyterrier_adaptive reads a graph's document ids from, written as one block whose format
    fits every id. npids' default starts a new block wherever an id breaks the current block's format, and such
    files can be unreadable (a last block of one id) or look ids up wrongly (a block of integers after other ids)."""
    from npids import Lookup

    Lookup.build(doc_ids, path, return_self=False, min_block=len(doc_ids))


def _without_self(ids: np.ndarray, sims: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the first k results that are neither the row itself nor faiss's -1 filler, in rank order; rows with
    fewer are padded with self-loops of weight 0."""
    if ids.shape[1] < k:  # a corpus of k documents or fewer
        pad = k - ids.shape[1]
        ids = np.pad(ids, ((0, 0), (0, pad)), constant_values=-1)
        sims = np.pad(sims, ((0, 0), (0, pad)))
    keep = (ids != rows[:, None]) & (ids >= 0)
    order = np.argsort(~keep, axis=1, kind="stable")[:, :k]  # kept results first, each group in rank order
    kept = np.take_along_axis(keep, order, axis=1)
    neighbours = np.where(kept, np.take_along_axis(ids, order, axis=1), rows[:, None]).astype(np.uint32)
    weights = np.where(kept, np.take_along_axis(sims, order, axis=1), 0).astype(np.float16)
    return neighbours, weights


def build_knn_graph(vectors: np.ndarray, params: KnnGraphParams) -> tuple[KnnGraph, dict]:
    """The graph ``params`` ask for, and facts for the manifest (the search used; for IVF, the nprobe chosen and
    the recall against exact search on the sample)."""
    n = len(vectors)
    if n < 2:  # no document has a neighbour (and npids cannot store a lookup of one id)
        raise GarenError(f"index.knn_graph: a corpus of {n} document cannot have a k-NN graph; leave the stage out of "
                         f"index.stages for such a corpus")
    search = params.search
    if search == "auto":
        search = "exact" if params.device == "cuda" or n <= params.exact_max_docs else "ivf"
    start = time.perf_counter()
    if search == "exact":
        graph = KnnGraph.search_all(flat_ip_index(vectors, params.device), vectors, params.k)
        return graph, {"search": "exact", "seconds": round(time.perf_counter() - start, 2)}
    nlist = params.nlist or max(1, min(round(4 * math.sqrt(n)), n // 39))  # faiss wants >= 39 points a list
    if nlist > n:
        raise GarenError(f"index.knn_graph.nlist={nlist}: an IVF index over {n} documents takes at most {n} lists")
    index = ivf_index(vectors, nlist, params.nprobe, params.seed, params.device)
    info = {"search": "ivf", "nlist": nlist}
    nprobe = params.nprobe
    if params.recall_sample:
        sample = SampleRecall(vectors, params.k, params.recall_sample, params.seed, params.device)
        recall = sample.of(index, nprobe)
        most = nlist if params.device == "cpu" else min(nlist, 2048)  # faiss on GPUs probes at most 2048 lists
        while recall < params.recall_target and nprobe < most:  # deterministic: the data and the seed decide
            nprobe = min(most, nprobe * 2)
            recall = sample.of(index, nprobe)
        info.update({"recall_at_k": round(recall, 4), "recall_sample": sample.size})
    _set_nprobe(index, nprobe, params.device)
    graph = KnnGraph.search_all(index, vectors, params.k)
    info.update({"nprobe": nprobe, "seconds": round(time.perf_counter() - start, 2)})
    return graph, info


def _set_nprobe(index, nprobe: int, device: str) -> None:
    if device == "cpu":
        index.nprobe = nprobe
    else:
        faiss = faiss_module()

        faiss.GpuParameterSpace().set_index_parameter(index, "nprobe", nprobe)


class SampleRecall:
    """Recall@k of an approximate index against exact search, over a seeded sample of rows: the share of each
    row's true k nearest neighbours that the index returns. A row's search does not depend on the other rows
    searched with it, so the sample's recall is the built graph's recall on those rows."""

    def __init__(self, vectors: np.ndarray, k: int, size: int, seed: int, device: str = "cpu"):
        n = len(vectors)
        self.k, self.device = k, device
        self.rows = np.sort(np.random.default_rng(seed).choice(n, min(size, n), replace=False))
        self.size, self.queries = len(self.rows), np.ascontiguousarray(vectors[self.rows], dtype=np.float32)
        self.truth = self._neighbours(flat_ip_index(vectors, device))

    def _neighbours(self, index) -> np.ndarray:
        sims, ids = index.search(self.queries, min(self.k + 1, index.ntotal))
        return _without_self(ids, sims, self.rows, self.k)[0]

    def of(self, index, nprobe: int) -> float:
        _set_nprobe(index, nprobe, self.device)
        found = self._neighbours(index)
        hits = total = 0
        for row, truth, got in zip(self.rows, self.truth, found):
            truth = set(truth[truth != row].tolist())
            hits += len(truth & set(got[got != row].tolist()))
            total += len(truth)
        return hits / total if total else 1.0
