"""The stages an index folder can hold. Each is a params dataclass plus a build function; later features
(groups, the proximity graph, the semantic tree) register themselves here with ``register``.

A stage's build function receives the open IndexFolder (to read stages it depends on), the dataset and its
params, writes its files atomically under ``folder.path / name`` and returns a small dict of facts that goes
into the manifest (sizes, timings, which model was used).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from garen_infer.index.atomic import save_array
from garen_infer.index.bm25 import Bm25Index, Bm25Params
from garen_infer.index.embeddings import Embedder, EmbeddingParams
from garen_infer.index.knn_graph import KnnGraph


@dataclass(frozen=True)
class Stage:
    name: str
    params_type: type
    build: Callable  # (folder, dataset, params) -> dict
    requires: tuple[str, ...] = ()


STAGES: dict[str, Stage] = {}


def register(stage: Stage) -> Stage:
    STAGES[stage.name] = stage
    return stage


def _build_bm25(folder, dataset, params: Bm25Params) -> dict:
    start = time.perf_counter()
    index = Bm25Index.build([d.full_text for d in dataset.documents], params)
    index.save(folder.path / "bm25")
    return {"seconds": round(time.perf_counter() - start, 2)}


def _build_embeddings(folder, dataset, params: EmbeddingParams) -> dict:
    start = time.perf_counter()
    embedder = Embedder(params)
    vectors = embedder.encode_documents([d.full_text for d in dataset.documents])
    save_array(folder.path / "embeddings.npy", vectors)
    return {"dim": int(vectors.shape[1]), "seconds": round(time.perf_counter() - start, 2)}


@dataclass(frozen=True)
class KnnGraphParams:
    k: int = 16  # GAREN App. A: each document linked to its 16 most similar documents (exact cosine)


def _build_knn_graph(folder, dataset, params: KnnGraphParams) -> dict:
    start = time.perf_counter()
    vectors = np.load(folder.path / "embeddings.npy")
    KnnGraph.build(vectors, params.k).save(folder.path / "knn_graph")
    return {"seconds": round(time.perf_counter() - start, 2)}


register(Stage("bm25", Bm25Params, _build_bm25))
register(Stage("embeddings", EmbeddingParams, _build_embeddings))
register(Stage("knn_graph", KnnGraphParams, _build_knn_graph, requires=("embeddings",)))


def load_optional_stages() -> None:
    """Import modules that register further stages (kept lazy: they pull heavier dependencies)."""
    import importlib

    for module in ("garen_infer.index.groups", "garen_infer.index.proximity_graph", "garen_infer.index.corpus_files"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name != module:
                raise


@dataclass
class IndexConfig:
    """Which stages to build, with their params, in build order (a preset's YAML, parsed)."""

    stages: dict[str, object] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: dict) -> "IndexConfig":
        from garen_infer.errors import GarenError

        load_optional_stages()
        stages = {}
        for name, values in (raw or {}).items():
            if name not in STAGES:
                raise GarenError(f"unknown index stage '{name}'; known: {', '.join(STAGES)}")
            try:
                stages[name] = STAGES[name].params_type(**(values or {}))
            except TypeError as err:
                raise GarenError(f"index stage '{name}': {err}") from err
        return cls(stages)
