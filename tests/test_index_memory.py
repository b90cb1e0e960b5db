"""An index build lets go of each stage's models before the next stage starts: on a GPU the embedding model would
otherwise still hold its memory when the groups stage's LLM engine claims its share (gpu_memory_utilization)."""

from __future__ import annotations

import gc
import weakref

from garen_infer.index.embeddings import EmbeddingParams, load_encoder
from garen_infer.index.folder import IndexFolder
from garen_infer.index.stages import IndexConfig


def test_the_embedding_model_is_released_once_its_stage_is_built(tiny_dataset, tmp_path):
    params = EmbeddingParams()
    encoder = weakref.ref(load_encoder(params.model, params.device, params.max_seq_length))  # the one the stage gets
    config = IndexConfig.from_dict({"embeddings": {}, "knn_graph": {"k": 4}})
    folder = IndexFolder.build(tiny_dataset, tmp_path / "index", config, log=lambda *_: None)
    gc.collect()
    assert folder.has("knn_graph") and encoder() is None
    assert folder.embedder.encode_queries(["volcano"]).shape == (1, folder.manifest["stages"]["embeddings"]["info"]["dim"])
