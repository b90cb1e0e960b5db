"""An index build lets go of each stage's models before the next stage starts: on a GPU the embedding model would
otherwise still hold its memory when the groups stage's LLM engine claims its share (gpu_memory_utilization)."""

from __future__ import annotations

import gc
import weakref

from garen_infer.index.folder import IndexFolder
from garen_infer.index.stages import IndexConfig
from garen_infer.llm.embeddings import EmbeddingParams, load_encoder


def test_the_embedding_model_is_released_once_its_stage_is_built(tiny_dataset, tmp_path):
    params = EmbeddingParams()
    encoder = weakref.ref(load_encoder(params.model, params.device, params.max_seq_length))  # the one the stage gets
    config = IndexConfig.from_dict({"embeddings": {}, "knn_graph": {"k": 4}})
    folder = IndexFolder.build(tiny_dataset, tmp_path / "index", config, log=lambda *_: None)
    gc.collect()
    assert folder.has("knn_graph") and encoder() is None
    assert folder.embedder.encode_queries(["volcano"]).shape == (1,
                                                                 folder.manifest["stages"]["embeddings"]["info"]["dim"])


def test_a_long_document_is_cut_before_tokenizing_to_the_same_vector():
    """Only the first max_seq_length tokens are embedded: the words past WORDS_PER_TOKEN_BOUND x max_seq_length
    are dropped before the tokenizer sees them (a 20 MB document is never tokenized whole), and the vector is the
    uncut text's."""
    import numpy as np

    from garen_infer.llm.embeddings import WORDS_PER_TOKEN_BOUND, Embedder, leading_words

    embedder = Embedder(EmbeddingParams(max_seq_length=16))
    long = " ".join(f"magma{i % 7} rises, through the crust." for i in range(400))  # 2,000 words
    assert len(leading_words(long, WORDS_PER_TOKEN_BOUND * 16).split()) == 64
    cut = embedder.encode_documents([long], show_progress=False)
    whole = embedder.encoder.encode([long], normalize_embeddings=True, convert_to_numpy=True)
    assert np.array_equal(cut, whole.astype(np.float32))
