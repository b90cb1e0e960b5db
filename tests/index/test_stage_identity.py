"""Only settings that change a stage's result identify it: another device, batch size or chunk size (say, lower
after running out of memory), a summarizer's batch size or a backend's memory share keeps what was built, down to
the embedding chunks an interrupted build saved. Settings that do change the result still rebuild."""

from __future__ import annotations

import shutil
from dataclasses import asdict

import numpy as np
import pytest
from conftest import cpu_default_stages

from garen_infer.index.folder import IndexFolder, same_result
from garen_infer.index.grouping.groups import GroupParams
from garen_infer.index.knn_graph import KnnGraphParams
from garen_infer.index.proximity_graph import ProximityGraphParams
from garen_infer.index.stages import IndexConfig
from garen_infer.llm.embeddings import Embedder, EmbeddingParams


def cpu_default_with(**changes) -> IndexConfig:
    stages = cpu_default_stages()  # as the full index was built
    for stage, values in changes.items():
        stages[stage] = {**stages[stage], **values}
    return IndexConfig.from_dict(stages)


def test_lower_batch_and_chunk_sizes_keep_every_stage(full_index, tiny_dataset, tmp_path):
    path = tmp_path / "index"
    shutil.copytree(full_index.path, path)
    before = {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file() and p.name != "manifest.json"}
    logged = []
    config = cpu_default_with(embeddings={"batch_size": 2, "chunk_size": 3}, groups={"batch_size": 1},
                              semantic_tree={"batch_size": 1})
    IndexFolder.build(tiny_dataset, path, config, log=logged.append)
    kept = {"embeddings": "batch_size, chunk_size", "groups": "batch_size", "semantic_tree": "batch_size"}
    assert logged == [f"[index] {name}: already built; {kept[name]} only change(s) how it runs, not the "
                      "result: kept" if name in kept
                      else f"[index] {name}: already built with these params, kept" for name in config.stages]
    after = {p.relative_to(path): p.read_bytes() for p in path.rglob("*") if p.is_file() and p.name != "manifest.json"}
    assert after == before
    IndexFolder.open(path, tiny_dataset)  # and the index is as trusted as before


def test_a_setting_that_changes_the_result_still_rebuilds(full_index, tiny_dataset, tmp_path):
    path = tmp_path / "index"
    shutil.copytree(full_index.path, path)
    logged = []
    IndexFolder.build(tiny_dataset, path, cpu_default_with(embeddings={"max_seq_length": 128}), log=logged.append)
    assert "[index] embeddings: params changed, rebuilding" in logged and "[index] knn_graph: building" in logged


def test_an_out_of_memory_stop_keeps_the_finished_chunks_for_a_smaller_batch(tiny_dataset, tmp_path, monkeypatch):
    """The real encoder fails on its third chunk as a GPU out of memory would; rerun with a smaller batch and
    chunk size, only the rows not yet saved are encoded, and the vectors are those of an uninterrupted build."""
    encode = Embedder.encode_documents
    encoded = []

    def out_of_memory_on_the_third_chunk(self, texts, **kw):
        if len(encoded) == 2:
            raise MemoryError("CUDA out of memory")
        encoded.append(len(texts))
        return encode(self, texts, **kw)

    monkeypatch.setattr(Embedder, "encode_documents", out_of_memory_on_the_third_chunk)
    stages = {"embeddings": {"chunk_size": 4, "batch_size": 4}}
    with pytest.raises(MemoryError):
        IndexFolder.build(tiny_dataset, tmp_path / "index", IndexConfig.from_dict(stages), log=lambda *_: None)
    assert encoded == [4, 4]
    monkeypatch.setattr(Embedder, "encode_documents", lambda self, texts,
                        **kw: encoded.append(len(texts)) or encode(self, texts, **kw))
    smaller = {"embeddings": {"chunk_size": 3, "batch_size": 1}}
    IndexFolder.build(tiny_dataset, tmp_path / "index", IndexConfig.from_dict(smaller), log=lambda *_: None)
    # rows 8-10 and 11, a batch of 1 each: the 8 rows saved before the stop were kept
    assert encoded == [4, 4, 1, 1, 1, 1]
    IndexFolder.build(tiny_dataset, tmp_path / "whole", IndexConfig.from_dict(stages), log=lambda *_: None)
    got, want = np.load(tmp_path / "index" / "embeddings.npy"), np.load(tmp_path / "whole" / "embeddings.npy")
    assert np.allclose(got, want, atol=1e-6)  # batch composition moves float rounding only
    assert not list((tmp_path / "index").glob(".embeddings.*"))


def test_which_settings_identify_a_stage():
    embeddings = asdict(EmbeddingParams())
    assert same_result(EmbeddingParams, embeddings,
                       {**embeddings, "device": "cuda", "batch_size": 256, "chunk_size": 100_000})
    assert not same_result(EmbeddingParams, embeddings, {**embeddings, "model": "other", "device": "cuda"})
    groups = asdict(GroupParams(summarizer={"backend": "vllm", "model": "m", "gpu_memory_utilization": 0.9,
                                            "tensor_parallel_size": 2}))
    fewer = {**groups, "batch_size": 4, "summarizer": {"backend": "vllm", "model": "m", "gpu_memory_utilization": 0.4}}
    assert same_result(GroupParams, groups, fewer)
    assert not same_result(GroupParams, groups, {**groups, "summarizer": {"backend": "vllm", "model": "other"}})
    # these do change the result: a GPU searches exactly where the CPU uses IVF; DiskANN's threads build other graphs
    knn = asdict(KnnGraphParams())
    assert not same_result(KnnGraphParams, knn, {**knn, "device": "cuda"})
    graph = asdict(ProximityGraphParams())
    assert not same_result(ProximityGraphParams, graph, {**graph, "threads": 4})


def test_an_index_recorded_with_every_setting_keeps_its_stages():
    """A manifest that records execution settings other than the ones asked for still matches."""
    recorded = {k: v for k, v in asdict(EmbeddingParams(batch_size=64, device="cuda")).items() if k != "chunk_size"}
    assert same_result(EmbeddingParams, recorded, asdict(EmbeddingParams(batch_size=8)))
