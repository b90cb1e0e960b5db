"""The stages an index folder can hold. Each is a params dataclass plus a build function; later features
(groups, the proximity graph, the semantic tree) register themselves here with ``register``.

A stage's build function receives the open index (``OpenIndex``: it reads the stages it depends on), the dataset and its
params, writes its files atomically under ``folder.path / name`` (or the ``outputs`` it declares) and returns a
small dict of facts that goes into the manifest (sizes, timings, which model was used). The manifest records
every output file's size and digest (``stage_files.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from garen_infer.index.embedding_stage import build_embeddings, build_first_stage_embeddings
from garen_infer.index.knn_graph import KnnGraphParams, build_knn_graph
from garen_infer.index.lexical.bm25 import Bm25Index, Bm25Params
from garen_infer.llm.embeddings import EmbeddingParams

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.index.open_index import OpenIndex


@dataclass(frozen=True)
class Stage:
    name: str
    params_type: type
    build: Callable  # (folder, dataset, params) -> dict
    requires: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()  # files or folders of the index folder it writes; () = the folder named after it
    # (folder, dataset, params, (I, N), log) -> facts: answers shard I of N of the stage's model prompts into
    # the folder's shards/, for a build given merge_shards to assemble; None: the stage does not shard
    shard: Callable | None = None


STAGES: dict[str, Stage] = {}


def register(stage: Stage) -> Stage:
    STAGES[stage.name] = stage
    return stage


def stage_outputs(name: str) -> tuple[str, ...]:
    """What stage ``name`` wrote (a stage no module registers, written by garen-train export: its folder)."""
    return (STAGES[name].outputs if name in STAGES else ()) or (name,)


def calls_generator(params) -> bool:
    """Whether a stage with ``params`` asks a generator model (its summarizer is not the extractive one)."""
    spec = getattr(params, "summarizer", None)
    return isinstance(spec, dict) and spec.get("backend", "extractive") != "extractive"


def model_free(stages: dict[str, object]) -> dict[str, object]:
    """The stages (name -> params) that ask no generator and read none that does: what ``index --shard I/N``
    jobs read, built once before them (``index --shard-prefix``)."""
    asks: set[str] = set()

    def asks_model(name: str) -> bool:
        if name not in asks and name in stages:
            if calls_generator(stages[name]) or any(asks_model(r) for r in STAGES[name].requires):
                asks.add(name)
        return name in asks

    return {name: params for name, params in stages.items() if not asks_model(name)}


def _build_bm25(folder: OpenIndex, dataset: Dataset, params: Bm25Params) -> dict:
    start = time.perf_counter()
    index = Bm25Index.build([d.full_text for d in dataset.documents], params)
    index.save(folder.path / "bm25")
    return {"seconds": round(time.perf_counter() - start, 2)}


def _build_knn_graph(folder: OpenIndex, dataset: Dataset, params: KnnGraphParams) -> dict:
    graph, info = build_knn_graph(np.load(folder.path / "embeddings.npy", mmap_mode="r"), params)
    graph.save(folder.path / "knn_graph", dataset.doc_ids)
    return info


register(Stage("bm25", Bm25Params, _build_bm25))
register(Stage("embeddings", EmbeddingParams, build_embeddings, outputs=("embeddings.npy",)))
register(Stage("first_stage_embeddings", EmbeddingParams, build_first_stage_embeddings,
               outputs=("first_stage_embeddings.npy",)))
register(Stage("knn_graph", KnnGraphParams, _build_knn_graph, requires=("embeddings",)))


def load_optional_stages() -> None:
    """Import modules that register further stages (kept lazy: they pull heavier dependencies)."""
    import importlib

    for module in ("garen_infer.index.grouping.groups", "garen_infer.index.proximity_graph",
                   "garen_infer.index.corpus_files",
                   "garen_infer.index.tree.semantic_tree_stage"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name != module:
                raise


@dataclass
class IndexConfig:
    """Which stages to build, with their params, in build order (a preset's YAML, parsed)."""

    stages: dict[str, Any] = field(default_factory=dict)  # stage name -> its params (a dataclass)

    @classmethod
    def from_dict(cls, raw: dict) -> IndexConfig:
        from garen_infer.errors import GarenError
        from garen_infer.settings import build, did_you_mean

        load_optional_stages()
        stages = {}
        for name, values in (raw or {}).items():
            if name not in STAGES:
                raise GarenError(f"unknown index stage '{name}'{did_you_mean(name, STAGES)}; known: "
                                 f"{', '.join(STAGES)}")
            stages[name] = build(STAGES[name].params_type, values, f"index.{name}")
        return cls(stages)
