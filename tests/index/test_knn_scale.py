"""The k-NN graph at scale: exact search vectorised with the same result as before, IVF above the threshold with
its recall against exact search in the manifest, the partition's edge list vectorised with the same result and
order; an index built before these options existed is kept, not rebuilt."""

from __future__ import annotations

import math

import numpy as np
import pytest

from garen_infer.errors import GarenError
from garen_infer.index.grouping.partition import _undirected_edges
from garen_infer.index.knn_graph import KnnGraph, KnnGraphParams, build_knn_graph, flat_ip_index


def planted(n: int, dim: int = 32, cluster: int = 25, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n // cluster), dim)).astype(np.float32)
    vectors = centres[rng.integers(0, len(centres), n)] + rng.standard_normal((n, dim)).astype(
        np.float32
    ) / math.sqrt(dim)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def rowwise_reference(vectors: np.ndarray, k: int) -> KnnGraph:
    """The graph as the first implementation built it, one row at a time."""
    n = len(vectors)
    sims, ids = flat_ip_index(vectors).search(vectors, min(k + 1, n))
    neighbours = np.repeat(np.arange(n, dtype=np.uint32)[:, None], k, axis=1)
    weights = np.zeros((n, k), dtype=np.float16)
    for row in range(n):
        keep = [(i, s) for i, s in zip(ids[row], sims[row]) if i != row and i >= 0][:k]
        for col, (i, s) in enumerate(keep):
            neighbours[row, col], weights[row, col] = i, s
    return KnnGraph(neighbours, weights)


@pytest.mark.parametrize("n, k", [(300, 16), (10, 16), (17, 16), (1, 4)])
def test_the_exact_graph_is_the_one_built_row_by_row(n, k):
    vectors = planted(n)
    vectors[n // 2 :: 7] = vectors[0]  # duplicates: a document's twin may outrank the document itself
    graph, reference = KnnGraph.build(vectors, k, batch=64), rowwise_reference(vectors, k)
    assert np.array_equal(graph.neighbours, reference.neighbours)
    assert np.array_equal(graph.weights, reference.weights)


def test_auto_keeps_exact_search_up_to_the_threshold():
    vectors = planted(400)
    graph, info = build_knn_graph(vectors, KnnGraphParams(k=8, exact_max_docs=400))
    assert info["search"] == "exact"
    assert np.array_equal(graph.neighbours, KnnGraph.build(vectors, 8).neighbours)


def test_ivf_above_the_threshold_reports_its_recall_and_is_deterministic():
    vectors = planted(4000, cluster=40)
    params = KnnGraphParams(k=8, exact_max_docs=1000, recall_sample=500, recall_target=0.95)
    graph, info = build_knn_graph(vectors, params)
    assert (
        info["search"] == "ivf"
        and info["nlist"] == min(round(4 * math.sqrt(4000)), 4000 // 39)
        and info["recall_sample"] == 500
    )
    assert info["recall_at_k"] >= 0.95
    exact = KnnGraph.build(vectors, 8)  # the reported recall is the graph's own, measured independently here
    rows = np.random.default_rng(params.seed).choice(4000, 500, replace=False)
    hits = sum(len(set(exact.neighbours[r]) & set(graph.neighbours[r])) for r in rows)
    assert hits / (500 * 8) == pytest.approx(info["recall_at_k"], abs=1e-4)
    again, _ = build_knn_graph(vectors, params)
    assert np.array_equal(graph.neighbours, again.neighbours) and np.array_equal(graph.weights, again.weights)


def test_a_recall_target_raises_nprobe_until_it_is_met():
    vectors = planted(3000, cluster=3000)  # no structure: the hardest case for IVF
    _, low = build_knn_graph(vectors, KnnGraphParams(k=8, search="ivf", nprobe=1, recall_target=0.0))
    _, high = build_knn_graph(vectors, KnnGraphParams(k=8, search="ivf", nprobe=1, recall_target=0.9))
    assert low["nprobe"] == 1 and high["nprobe"] > 1
    assert high["recall_at_k"] >= 0.9 > low["recall_at_k"]


def test_cuda_without_a_gpu_is_one_clear_line():
    import faiss

    if hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
        pytest.skip("a GPU is visible: the cuda path runs instead")
    with pytest.raises(GarenError, match="knn_graph device 'cuda' needs faiss built with GPU support"):
        build_knn_graph(planted(50), KnnGraphParams(k=4, device="cuda"))


def edges_by_a_loop(neighbours, weights, nodes=None):
    """The partition's edge list as the first implementation built it: a dict, in scan order."""
    n = len(neighbours)
    keep = np.ones(n, dtype=bool) if nodes is None else np.isin(np.arange(n), nodes)
    src = np.repeat(np.arange(n), neighbours.shape[1])
    dst = neighbours.reshape(-1).astype(np.int64)
    w = np.clip(weights.reshape(-1).astype(np.float64), 1e-6, None)
    mask = keep[src] & keep[dst] & (src != dst)
    edges = {}
    for a, b, x in zip(np.minimum(src, dst)[mask].tolist(), np.maximum(src, dst)[mask].tolist(), w[mask].tolist()):
        edges[(a, b)] = max(edges.get((a, b), 0.0), x)
    return edges


def test_the_vectorised_edge_list_is_the_loops_in_the_same_order():
    rng = np.random.default_rng(0)
    for _ in range(100):
        n, k = int(rng.integers(1, 50)), int(rng.integers(1, 8))
        neighbours = rng.integers(0, n, size=(n, k)).astype(np.uint32)
        weights = rng.choice(np.array([-0.5, 0.0, 0.3, 0.5, 0.9], dtype=np.float16), size=(n, k))  # ties, <= 0
        for nodes in (None, rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False)):
            expected, got = edges_by_a_loop(neighbours, weights, nodes), _undirected_edges(neighbours, weights, nodes)
            assert list(got.items()) == list(expected.items())


@pytest.mark.parametrize("search", ["exact", "ivf"])
def test_k_above_the_corpus_size_pads_each_row_with_itself(search):
    """Every row links to each other document once; the rest of its k slots are self-loops of weight 0, the
    np_topk convention, never another document (pyterrier_adaptive and GAREN skip self-loops)."""
    vectors = planted(10)
    graph, _ = build_knn_graph(vectors, KnnGraphParams(k=16, search=search, nlist=1, recall_sample=0))
    for row in range(10):
        assert sorted(graph.neighbours[row, :9].tolist()) == [r for r in range(10) if r != row]
        assert (graph.neighbours[row, 9:] == row).all() and (graph.weights[row, 9:] == 0).all()


# ids whose shape changes near the end: npids' default layout (a new block wherever an id breaks the current
# block's format) failed on each, with a ZeroDivisionError, a LookupError, or a wrong row for an id
MIXED_IDS = {
    "one id of another shape last": [f"a{i}-{i % 7}" for i in range(300)] + ["5"],
    "integers after prefixed ids": [f"doc{i}" for i in range(300)] + ["5", "6"],
    "prefixed ids after integers": [str(i) for i in range(256)] + [f"PMC{i:06d}" for i in range(5, 305)],
    "zero-padded hex after integers": [str(i) for i in range(600)] + [f"{i:08x}" for i in range(5, 10)],
}


@pytest.mark.parametrize("ids", MIXED_IDS.values(), ids=MIXED_IDS.keys())
def test_the_graph_s_document_ids_read_back_whatever_their_shapes(ids, tmp_path):
    from npids import Lookup

    n = len(ids)
    graph = KnnGraph(np.zeros((n, 1), dtype=np.uint32), np.zeros((n, 1), dtype=np.float16))
    graph.save(tmp_path / "knn_graph", ids)
    with Lookup(tmp_path / "knn_graph" / "docnos.npids") as docnos:
        assert list(docnos) == ids
        assert [docnos.inv[doc_id] for doc_id in ids] == list(range(n))
