"""Bottom-up (agglomerative) semantic tree, LATTICE App. B.3.1 (RAPTOR-style):

    layer = the documents, with their embeddings
    while layer has more than M nodes:
        cluster the layer's embeddings into clusters of at most M
        describe each cluster (extractive, or the generator)      -> the next layer's nodes
        embed the descriptions                                    -> the next layer's embeddings
    root = a node over the last layer

The paper clusters Gecko embeddings with iterative spectral clustering; here the index's embedding model and
size-bounded spherical k-means (``balanced_clusters``: no cluster above M, so none is split again). Each layer's
cluster size is n^(1/L), L the fewest layers that reach a root of at most M children, so every level has about
the same fan-out (SciFact: 5,183 -> ~300 -> ~18; plain k-means with re-splitting left the root 3 children).
A cluster of one member is not wrapped in a node of its own: the member moves up to the next layer unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from garen_infer.index.grouping.partition import groups_from_labels
from garen_infer.index.tree.semantic_tree import BuiltNode


def layer_size(n: int, max_children: int) -> float:
    """n^(1/L) with L the fewest layers such that M^L >= n: the cluster size that gives every layer one fan-out."""
    layers = 1
    while max_children**layers < n:
        layers += 1
    return n ** (1 / layers)


def balanced_clusters(
    vectors: np.ndarray, k: int, capacity: int, seed: int, rounds: int = 10, probe: int = 8
) -> list[list[int]]:
    """Size-bounded spherical k-means: faiss k-means centroids, then ``rounds`` of (assign each point to a centroid
    with room, pairs taken best first, ``capacity`` members at most; move each centroid to its members' mean
    direction). Plain k-means can leave 40 points of a tight group one centroid; a few rounds move the neighbouring
    centroids onto the overflow instead of scattering it. Needs k * capacity >= n."""
    from garen_infer.index.knn_graph import faiss_module

    faiss = faiss_module()
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    kmeans = faiss.Kmeans(x.shape[1], k, niter=20, seed=seed, spherical=True, min_points_per_centroid=1)
    kmeans.train(x)
    centroids = np.array(kmeans.centroids, dtype=np.float32)
    label = None
    for _ in range(max(rounds, 1)):
        label = _assign_with_capacity(x, centroids, capacity, probe)
        for c in range(k):
            total = x[label == c].sum(axis=0)
            norm = float(np.linalg.norm(total))
            if norm > 0:
                centroids[c] = total / norm
    assert label is not None  # the loop runs at least once
    return groups_from_labels(label)


def _assign_with_capacity(x: np.ndarray, centroids: np.ndarray, capacity: int, probe: int) -> np.ndarray:
    """(point, centroid) pairs among each point's ``probe`` nearest centroids, most similar first: a point goes to
    the first centroid with room; a point whose probed centroids all filled up takes its best centroid with room."""
    from garen_infer.index.knn_graph import faiss_module

    faiss = faiss_module()
    k = len(centroids)
    index = faiss.IndexFlatIP(centroids.shape[1])
    index.add(centroids)
    similarity, nearest = index.search(x, min(probe, k))
    label = np.full(len(x), -1)
    load = np.zeros(k, dtype=np.int64)
    for flat in np.argsort(-similarity, axis=None, kind="stable").tolist():
        point, rank = divmod(flat, nearest.shape[1])
        centroid = int(nearest[point, rank])
        if label[point] < 0 and load[centroid] < capacity:
            label[point] = centroid
            load[centroid] += 1
    for point in np.flatnonzero(label < 0).tolist():
        centroid = int(np.argmax(np.where(load < capacity, centroids @ x[point], -np.inf)))
        label[point] = centroid
        load[centroid] += 1
    return label


def build_bottom_up(doc_vectors: np.ndarray, doc_texts: list[str], describer, embed: Callable[[list[str]], np.ndarray],
                    max_children: int, seed: int, log=print) -> BuiltNode:
    nodes: list = list(range(len(doc_texts)))  # corpus rows (leaves), later BuiltNodes
    rows: list[list[int]] = [[r] for r in nodes]  # the documents beneath each node of the layer
    texts: list[str] = list(doc_texts)
    vectors = np.asarray(doc_vectors, dtype=np.float32)
    layer = 0
    while len(nodes) > max_children:
        # n - 1: one merge at least
        k = min(math.ceil(len(nodes) / layer_size(len(nodes), max_children)), len(nodes) - 1)
        clusters = balanced_clusters(vectors, k, max_children, seed)
        grouped = [c for c in clusters if len(c) > 1]
        documents = [sorted(r for i in c for r in rows[i]) for c in grouped]
        described = describer.describe([(docs, [texts[i] for i in c]) for docs, c in zip(documents, grouped)])
        new_vectors = embed([d for d, _ in described]) if described else np.zeros((0, vectors.shape[1]), np.float32)
        made = iter(zip(described, new_vectors, documents))
        upper = []  # (node, its documents, its text, its vector) of the next layer
        for c in clusters:
            if len(c) == 1:  # carried up unchanged
                upper.append((nodes[c[0]], rows[c[0]], texts[c[0]], vectors[c[0]]))
                continue
            (desc, source), vector, docs = next(made)
            upper.append((BuiltNode(desc, source, [nodes[i] for i in c]), docs, desc, vector))
        layer += 1
        log(f"[semantic_tree] bottom-up layer {layer}: {len(nodes)} nodes -> {len(upper)}")
        nodes, rows, texts = [u[0] for u in upper], [u[1] for u in upper], [u[2] for u in upper]
        vectors = np.asarray([u[3] for u in upper], dtype=np.float32)
    return BuiltNode("", "root", nodes)
