"""What the soft-partition job reads from an index folder (files are the contract), ready for mini-batches.

- ``edges``: the k-NN graph (``knn_graph/``, np_topk layout) made undirected, an edge kept once per pair with the
  larger cosine, clipped to > 0 as the Leiden input is; stored in both directions, sorted by source (CSR), so a
  batch's incident edges are a few slices.
- ``features``: SIGN features (Frasca et al. 2020, "SIGN: Scalable Inception Graph Neural Networks"):
  [X, ÂX, ..., Â^K X] with Â = D^-1/2 (A + I) D^-1/2, computed once with torch sparse products and kept in
  float16. The encoder is then a per-document function of precomputed rows: any set of documents is a valid
  mini-batch, a batch needs no neighbour sampling (torch-geometric's NeighborLoader and ClusterData need pyg-lib or
  torch-sparse, which are not installed), and inference over the whole corpus is exact and batch-independent.
- ``init``: the partition training starts from: a groups stage's ``doc_groups.npy`` (Leiden by default; the number
  of groups is then Leiden's), k-means on the embeddings, or random labels.
Memory is linear in the corpus: (K+1) x n x dim float16 features plus the edges (n x 2k pairs).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from garen_infer.errors import GarenError
from garen_infer.index.knn_graph import KnnGraph


@dataclass
class PartitionGraph:
    path: Path
    corpus: dict  # the index manifest's corpus entry (name, fingerprint, doc_count)
    neighbours: torch.Tensor  # (n, k) directed k-NN rows (self-loop padding kept): candidate groups come from them
    indptr: torch.Tensor  # (n + 1,) CSR over the undirected edges, by source
    dst: torch.Tensor  # (2E,) edge targets
    weight: torch.Tensor  # (2E,) float32 edge weights (cosine, clipped to > 0)
    features: torch.Tensor | None  # (n, K + 1, dim) float16 SIGN features (None when loaded without hops)

    @property
    def n(self) -> int:
        return len(self.neighbours)

    @property
    def degree(self) -> torch.Tensor:
        if not hasattr(self, "_degree"):
            self._degree = torch.zeros(self.n).index_add_(0, self.src, self.weight)
        return self._degree

    @property
    def src(self) -> torch.Tensor:
        if not hasattr(self, "_src"):
            self._src = torch.repeat_interleave(torch.arange(self.n), self.indptr.diff())
        return self._src

    def incident(self, nodes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions of the edges leaving ``nodes`` (into dst/weight) and each edge's source as an index into nodes."""
        starts, counts = self.indptr[nodes], self.indptr[nodes + 1] - self.indptr[nodes]
        local = torch.repeat_interleave(torch.arange(len(nodes)), counts)
        offsets = torch.arange(int(counts.sum())) - torch.repeat_interleave(counts.cumsum(0) - counts, counts)
        return starts[local] + offsets, local

    @classmethod
    def load(cls, index: str | Path, hops: int | None = 2) -> PartitionGraph:
        """The graph of an index folder, with SIGN features over ``hops`` hops (None: the graph alone)."""
        path = Path(index)
        manifest = _manifest(path)
        for stage in ("embeddings", "knn_graph"):
            if stage not in manifest["stages"]:
                raise GarenError(f"{path}: the soft partition needs the index stage '{stage}', which this index lacks")
        knn = KnnGraph.load(path / "knn_graph")
        vectors = np.load(path / "embeddings.npy", mmap_mode="r")
        if len(vectors) != len(knn.neighbours):
            raise GarenError(f"{path}: embeddings.npy has {len(vectors)} rows but knn_graph has {len(knn.neighbours)}")
        indptr, dst, weight = undirected_csr(knn.neighbours, knn.weights)
        features = None if hops is None else sign_features(vectors, indptr, dst, weight, hops)
        return cls(path, manifest["corpus"], torch.from_numpy(knn.neighbours.astype(np.int64)), indptr, dst,
                   weight, features)


def _manifest(path: Path) -> dict:
    try:
        return json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GarenError(
            f"{path}: not an index folder (no manifest.json); build one with 'garen-infer index'"
        ) from None


def undirected_csr(neighbours: np.ndarray, weights: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The k-NN rows as an undirected graph in CSR form: one weight per pair (the larger), both directions."""
    from torch_geometric.utils import to_undirected

    n, k = neighbours.shape
    src = torch.arange(n).repeat_interleave(k)
    dst = torch.from_numpy(neighbours.reshape(-1).astype(np.int64))
    w = torch.from_numpy(weights.reshape(-1).astype(np.float32)).clamp_(min=1e-6)  # cosines can be <= 0
    keep = src != dst  # self-loop padding of short rows
    edge_index, w = to_undirected(torch.stack([src[keep], dst[keep]]), w[keep], num_nodes=n, reduce="max")
    counts = torch.bincount(edge_index[0], minlength=n)  # to_undirected returns edges sorted by source
    indptr = torch.zeros(n + 1, dtype=torch.long)
    indptr[1:] = counts.cumsum(0)
    return indptr, edge_index[1].contiguous(), w.contiguous()


def sign_features(vectors: np.ndarray, indptr, dst, weight, hops: int, chunk: int = 65536) -> torch.Tensor:
    """[X, ÂX, ..., Â^K X] in float16, Â the GCN-normalised adjacency with self-loops."""
    n = len(vectors)
    degree = torch.zeros(n).index_add_(0, torch.repeat_interleave(torch.arange(n), indptr.diff()), weight) + 1.0
    scale = degree.rsqrt()
    src = torch.repeat_interleave(torch.arange(n), indptr.diff())
    values = scale[src] * weight * scale[dst]
    with warnings.catch_warnings():  # torch calls sparse CSR "beta"; the product used here is long stable
        warnings.simplefilter("ignore", UserWarning)
        adjacency = torch.sparse_csr_tensor(indptr, dst, values, (n, n))
    self_loop = (scale * scale).unsqueeze(1)
    features = torch.empty((n, hops + 1, vectors.shape[1]), dtype=torch.float16)
    current = torch.empty((n, vectors.shape[1]), dtype=torch.float32)
    for start in range(0, n, chunk):  # the embeddings may be a memory map: read them in pieces
        current[start : start + chunk] = torch.from_numpy(np.array(vectors[start : start + chunk], dtype=np.float32))
    features[:, 0] = current.half()
    for hop in range(1, hops + 1):
        current = torch.sparse.mm(adjacency, current) + self_loop * current
        features[:, hop] = current.half()
    return features


def init_labels(path: Path, init: str, stage: str, n_groups: int | None, seed: int) -> np.ndarray:
    """The initial partition, one label per row: from a groups stage, k-means or random; k-means and random
    default to as many groups as the index's Leiden stage (GAREN App. C.2's control)."""
    from garen_infer.index.grouping.partition import kmeans_groups, random_groups

    manifest = _manifest(path)
    if init == "groups":
        if stage not in manifest["stages"]:
            raise GarenError(f"{path}: init 'groups' reads the groups stage '{stage}', which this index lacks")
        labels = np.load(path / stage / "doc_groups.npy").astype(np.int64)
        if n_groups is not None and n_groups != labels.max() + 1:
            raise GarenError(f"n_groups {n_groups} differs from the {labels.max() + 1} groups of stage "
                             f"'{stage}'; leave it null")
        return labels
    if n_groups is None:
        if "groups" not in manifest["stages"]:
            raise GarenError(f"{path}: init '{init}' needs n_groups, or a 'groups' stage to match its number of groups")
        n_groups = manifest["stages"]["groups"]["info"]["groups"]
    n = manifest["corpus"]["doc_count"]
    if init == "kmeans":
        groups = kmeans_groups(np.asarray(np.load(path / "embeddings.npy", mmap_mode="r"), dtype=np.float32),
                               n_groups, seed)
    elif init == "random":
        groups = random_groups(n, n_groups, seed)
    else:
        raise GarenError(f"unknown init '{init}' (groups, kmeans or random)")
    labels = np.empty(n, dtype=np.int64)
    for g, rows in enumerate(groups):
        labels[rows] = g
    return labels
