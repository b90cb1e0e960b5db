"""Bottom-up (agglomerative) semantic tree, LATTICE App. B.3.1 (RAPTOR-style):

    layer = the documents, with their embeddings
    while layer has more than M nodes:
        cluster the layer's embeddings into clusters of at most M
        describe each cluster (extractive, or the generator)      -> the next layer's nodes
        embed the descriptions                                    -> the next layer's embeddings
    root = a node over the last layer

The paper clusters Gecko embeddings with iterative spectral clustering; here the index's embedding model and
spherical k-means, re-splitting any cluster larger than M. A cluster of one member is not wrapped in a node of its
own: the member moves up to the next layer unchanged, so the tree has no one-child chains.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from garen_infer.index.partition import kmeans_groups
from garen_infer.index.semantic_tree import BuiltNode


def cluster_at_most(vectors: np.ndarray, max_size: int, seed: int) -> list[list[int]]:
    """Spherical k-means into ceil(n / max_size) clusters, then each cluster above ``max_size`` split again; a
    cluster k-means cannot split (identical vectors) is cut into consecutive chunks."""
    n = len(vectors)
    if n <= max_size:
        return [list(range(n))]
    clusters = kmeans_groups(np.ascontiguousarray(vectors, dtype=np.float32), math.ceil(n / max_size), seed)
    if len(clusters) == 1:
        return [list(range(i, min(i + max_size, n))) for i in range(0, n, max_size)]
    out = []
    for members in clusters:
        if len(members) <= max_size:
            out.append(members)
        else:
            out.extend([members[i] for i in sub] for sub in cluster_at_most(vectors[members], max_size, seed))
    return out


def build_bottom_up(doc_vectors: np.ndarray, doc_texts: list[str], describer, embed: Callable[[list[str]], np.ndarray],
                    max_children: int, seed: int, log=print) -> BuiltNode:
    nodes: list = list(range(len(doc_texts)))  # corpus rows (leaves), later BuiltNodes
    rows: list[list[int]] = [[r] for r in nodes]  # the documents beneath each node of the layer
    texts: list[str] = list(doc_texts)
    vectors = np.asarray(doc_vectors, dtype=np.float32)
    layer = 0
    while len(nodes) > max_children:
        clusters = cluster_at_most(vectors, max_children, seed)
        if len(clusters) >= len(nodes):  # no progress (every cluster a singleton): group neighbours in order
            clusters = [list(range(i, min(i + max_children, len(nodes)))) for i in range(0, len(nodes), max_children)]
        grouped = [c for c in clusters if len(c) > 1]
        described = describer.describe([(sorted(r for i in c for r in rows[i]), [texts[i] for i in c]) for c in grouped])
        new_vectors = embed([d for d, _ in described]) if described else np.zeros((0, vectors.shape[1]), np.float32)
        made = iter(zip(described, new_vectors))
        upper = []  # (node, its documents, its text, its vector) of the next layer
        for c in clusters:
            if len(c) == 1:  # carried up unchanged
                upper.append((nodes[c[0]], rows[c[0]], texts[c[0]], vectors[c[0]]))
                continue
            (desc, source), vector = next(made)
            upper.append((BuiltNode(desc, source, [nodes[i] for i in c]), sorted(r for i in c for r in rows[i]), desc, vector))
        layer += 1
        log(f"[semantic_tree] bottom-up layer {layer}: {len(nodes)} nodes -> {len(upper)}")
        nodes, rows, texts = [u[0] for u in upper], [u[1] for u in upper], [u[2] for u in upper]
        vectors = np.asarray([u[3] for u in upper], dtype=np.float32)
    return BuiltNode("", "root", nodes)
