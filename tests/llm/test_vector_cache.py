"""The embedding backend's query and text vectors are cached like every other model answer: the same configuration
run again (into a new run folder, by a new process) makes no model call and ranks byte for byte the same."""

from __future__ import annotations

import json

import numpy as np

from garen_infer.configuration.run_config import RunConfig
from garen_infer.index.folder import IndexFolder
from garen_infer.llm.cache import ResponseCache
from garen_infer.llm.embeddings import Embedder, EmbeddingParams
from garen_infer.llm.vector_cache import VectorCache, attach
from garen_infer.running.session import execute

EMBEDDING_ROLES = {"reranker": {"backend": "embedding"}, "navigator": {"backend": "embedding"}}


def garen() -> RunConfig:
    return RunConfig.build("garen", {"budget": 12, "window": 4, "keep": 2}, models=EMBEDDING_ROLES)


def test_a_rerun_into_a_new_folder_makes_no_model_call(tiny_dataset, full_index, tmp_path):
    cache = tmp_path / "c.sqlite"
    # each run opens the index afresh, as a new process does: the shared fixture's models may hold vectors that
    # other tests encoded, and a run that needed no encoding would write nothing to the cache
    first_process = IndexFolder.open(full_index.path, tiny_dataset)
    first = execute(tiny_dataset, first_process, garen(), tmp_path / "a", cache=ResponseCache(cache),
                    log=lambda *_: None)
    fresh_process = IndexFolder.open(full_index.path, tiny_dataset)  # its embedder has encoded nothing yet
    second = execute(tiny_dataset, fresh_process, garen(), tmp_path / "b", cache=ResponseCache(cache),
                     log=lambda *_: None)
    assert first["mean_model_calls"] > 0
    assert (
        second["mean_model_calls"] == 0
        and second["mean_cache_hits"] == first["mean_model_calls"] + first["mean_cache_hits"]
    )
    assert (tmp_path / "a" / "run.trec").read_bytes() == (tmp_path / "b" / "run.trec").read_bytes()
    ledgers = [json.loads(line)["ledger"] for line in (tmp_path / "b" / "trace.jsonl").read_text().splitlines()]
    assert all(role["model_calls"] == 0 for ledger in ledgers for role in ledger["roles"].values())


def test_vectors_read_back_are_bit_for_bit_the_encoded_ones(tmp_path):
    params = EmbeddingParams()
    encoder, replay = Embedder(params), Embedder(params)
    attach(encoder, ResponseCache(tmp_path / "c.sqlite"))
    attach(replay, ResponseCache(tmp_path / "c.sqlite"))
    texts = ["how do plants make sugar", "photosynthesis in leaves"]
    encoded = encoder.encode_each(texts)
    assert not encoder.answered_from_cache(texts)
    assert np.array_equal(replay.encode_each(texts), encoded) and replay.answered_from_cache(texts)


def test_the_key_names_the_model_and_every_setting_that_changes_a_vector(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    base = VectorCache(cache, EmbeddingParams())
    assert base.key("", "q") == VectorCache(cache, EmbeddingParams(batch_size=7, device="cpu")).key("", "q")
    assert base.key("", "q") != VectorCache(cache, EmbeddingParams(max_seq_length=128)).key("", "q")
    assert base.key("", "q") != VectorCache(cache, EmbeddingParams(model="other")).key("", "q")
    assert base.key("", "q") != VectorCache(cache, EmbeddingParams(), "@0123456789ab").key("", "q")
    assert base.key("", "q") != base.key("query: ", "q")
