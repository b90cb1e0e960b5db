"""A dense first stage with vectors of its own (index stage first_stage_embeddings), encoded the way
ReasonIR-8B is (configs/garen-paper-reasonir.yaml): the task instruction in the query prompt, a document
prompt, and a mean over the text's tokens only. A tiny local BERT plays the model through the same loading
path (sentence-transformers, trust_remote_code, a dtype); ReasonIR itself is never fetched here."""

from __future__ import annotations

import json

import numpy as np
import pytest

from garen_infer.configuration.presets import load_preset
from garen_infer.index.first_stage import FirstStageConfig, all_scores, excluded_rows, first_stage
from garen_infer.index.folder import IndexFolder
from garen_infer.index.stages import IndexConfig
from garen_infer.index.task_instructions import GENERIC, task_instruction
from garen_infer.llm.embeddings import Embedder, EmbeddingParams

PROMPT = "user {instruction} embed "


def reasonir_like(model_dir, **options) -> dict:
    return {"model": str(model_dir), "max_seq_length": 128, "query_prompt": PROMPT,
            "document_prompt": "embed ", "pool_prompt": False, "trust_remote_code": True, "dtype": "float32",
            **options}


def test_the_prompt_is_left_out_of_the_mean(tiny_bert_dir):
    """pool_prompt: false averages the token states of the text alone, as ReasonIR's encoder does."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    embedder = Embedder(EmbeddingParams(**reasonir_like(tiny_bert_dir)), instruction="find python code")
    prompt = "user find python code embed "
    text = "python dictionary key lookup"
    tokenizer, model = AutoTokenizer.from_pretrained(tiny_bert_dir), AutoModel.from_pretrained(tiny_bert_dir)
    with torch.no_grad():
        states = model(**tokenizer(prompt + text, return_tensors="pt")).last_hidden_state[0]
    skip = len(tokenizer(prompt)["input_ids"]) - 1  # [CLS] and the prompt's tokens (not its [SEP])
    mean = states[skip:].mean(0).numpy()
    assert embedder.encode_queries([text])[0] == pytest.approx(mean / np.linalg.norm(mean), abs=1e-5)
    pooled = Embedder(EmbeddingParams(**reasonir_like(tiny_bert_dir, pool_prompt=True)), "find python code")
    assert not np.allclose(pooled.encode_queries([text])[0], embedder.encode_queries([text])[0], atol=1e-3)


def test_a_first_stage_with_its_own_vectors(tiny_dataset, tiny_index, tiny_bert_dir, tmp_path):
    import shutil

    path = tmp_path / "index"
    shutil.copytree(tiny_index.path, path)
    config = IndexConfig.from_dict({"first_stage_embeddings": reasonir_like(tiny_bert_dir)})
    index = IndexFolder.build(tiny_dataset, path, config, log=lambda *_: None)
    own, graph = index.vectors("first_stage_embeddings"), index.embeddings
    assert own.shape == (len(tiny_dataset.documents), 32)
    assert graph.shape[1] == 384  # the graph keeps MiniLM's
    encoder = index.encoder("first_stage_embeddings")
    assert encoder.query_prompt == f"user {GENERIC} embed "  # outside BRIGHT: the generic one
    texts = [d.full_text for d in tiny_dataset.documents]
    documents = encoder.encode_documents(texts, show_progress=False)
    assert np.allclose(own, documents, atol=1e-5)  # each document encoded after its prompt

    stage = FirstStageConfig(kind="dense", vectors="first_stage_embeddings", depth=5)
    query = tiny_dataset.queries[2].text
    expected = np.argsort(-(np.asarray(own) @ encoder.encode_queries([query])[0]), kind="stable")[:5]
    assert first_stage(index, [query], stage)[0] == [int(r) for r in expected]
    scores = own @ encoder.query_vectors([query])[0]
    assert all_scores(index, "dense", query, "first_stage_embeddings") == pytest.approx(scores)

    # a run reads its pool from those vectors, and its config records the stage it searched
    from garen_infer.running.runner import RunConfig
    from garen_infer.running.session import execute

    stage = {"kind": "dense", "vectors": "first_stage_embeddings", "depth": 4}
    reranker = {"reranker": {"backend": "embedding"}}
    run = RunConfig.build(method="rerank", budget=4, first_stage=stage, models=reranker)
    metrics = execute(tiny_dataset, index, run, tmp_path / "run", log=lambda *_: None)
    assert metrics["queries"] == 4
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert "first_stage_embeddings" in config["index_stages"]
    queries = tiny_dataset.queries
    exclude = [excluded_rows(q, tiny_dataset.doc_index) for q in queries]  # as every run drops them
    pools = first_stage(index, [q.text for q in queries], FirstStageConfig(**stage), exclude)
    for record in map(json.loads, (tmp_path / "run" / "trace.jsonl").read_text().splitlines()):
        pool = pools[[q.id for q in queries].index(record["qid"])]
        assert set(record["ranking"]) <= {tiny_dataset.doc_ids[r] for r in pool}


def test_bright_task_instructions():
    biology = "Given a Biology post, retrieve relevant passages that help answer the post"
    assert task_instruction("bright/biology") == biology
    assert task_instruction("bright/pony:long").endswith("relevant documents that help answer the question")
    theorems = "Given a Math problem, retrieve relevant theorems that help answer the problem"
    assert task_instruction("bright/theoremqa_theorems") == theorems
    assert task_instruction("beir/scifact") == GENERIC


def test_the_reasonir_preset():
    preset = load_preset("garen-paper-reasonir")
    reasonir = preset["index"]["first_stage_embeddings"]
    assert reasonir["model"] == "reasonir/ReasonIR-8B"
    assert reasonir["trust_remote_code"] and not reasonir["pool_prompt"]
    assert preset["index"]["embeddings"]["model"] == "Qwen/Qwen3-Embedding-4B"  # the graph's, unchanged
    assert preset["first_stage"] == {"kind": "dense", "vectors": "first_stage_embeddings", "depth": 1000,
                                     "query": "bright:gpt4", "models_read": "original"}
    assert "first_stage_embeddings" in IndexConfig.from_dict(preset["index"]).stages
