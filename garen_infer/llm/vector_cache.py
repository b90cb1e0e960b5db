"""An embedding model's query and text vectors kept in the response cache, like every other model answer: a rerun
of the same configuration (into a new ``--out`` too) reads them back and encodes nothing. Passage vectors are the
index's own and are not cached here.

A vector is keyed on what makes it: the embedding model and every setting that changes its numbers (the fields of
``EmbeddingParams`` that are not execution-only, so a runtime backend added there is part of the key), the weights
of an exported model, the prompt and the text. It is stored as the bytes of its float32 values, so a vector read
back is bit for bit the one encoded, and a rerun ranks exactly as the first run."""

from __future__ import annotations

import base64
from dataclasses import asdict

import numpy as np

from garen_infer.llm.cache import cache_key


class VectorCache:
    def __init__(self, cache, params, weights: str = ""):
        from garen_infer.llm.embeddings import EmbeddingParams
        from garen_infer.settings import identity

        self.cache = cache
        self.model_id = ("embedding", identity(EmbeddingParams, asdict(params)), weights)

    def key(self, prompt: str, text: str) -> str:
        return cache_key(self.model_id, "vector", prompt, text)

    def read(self, texts: list[str], prompt: str) -> dict[str, np.ndarray]:
        keys = {self.key(prompt, t): t for t in texts}
        found = self.cache.get_many(list(keys))
        return {keys[k]: _vector(value) for k, value in found.items() if "vector" in value}

    def write(self, vectors: dict[str, np.ndarray], prompt: str) -> None:
        self.cache.put_many({self.key(prompt, t): _stored(v) for t, v in vectors.items()})


def _stored(vector: np.ndarray) -> dict:
    values = np.ascontiguousarray(vector, dtype=np.float32)
    return {"vector": base64.b64encode(values.tobytes()).decode("ascii"), "dim": int(values.shape[0])}


def _vector(value: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(value["vector"]), dtype=np.float32).copy()


def attach(embedder, cache) -> None:
    """Keep ``embedder``'s query and text vectors in ``cache``; an exported model's weights are part of the key.
    Moved to another cache, it forgets which vectors the last one answered."""
    from garen_infer.llm.exported_models import weights_tag

    if embedder.vector_cache is not None and embedder.vector_cache.cache is cache:
        return
    embedder.vector_cache = VectorCache(cache, embedder.params, weights_tag(embedder.params.model))
    embedder.read_back = set()
