"""The settings of a role played by an embedding model (``backend: embedding``, the default where a role names no
backend): documented here so ``garen-infer options embedding`` lists them as it lists any backend's; a spec's keys
are checked against these fields (llm/model_specs.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EmbeddingRole:
    backend: str = "embedding"  # the default backend: no LLM, the cosine between the query's and a text's vectors
    mode: str = "listwise"  # the reranker's only: listwise orders a window by cosine; pointwise scores each document
    #   as a yes/no scorer, (1 + cos) / 2
    model: str = ""  # "": the index's own embedding model and document vectors; a folder or model name: the
    #   role's own model (e.g. a garen-train export), which encodes the query and every text it scores
    # {input_per_million, output_per_million}: what its tokens would cost (evaluation/costs.py)
    price: dict | None = None
