"""What a stage's build function, the first stage and the build summary read from an index while it is open.

An open index folder (``index/folder.py``) is one; the stages and readers below the folder in the layers type
against this protocol, so none of them imports the folder that imports them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np

from garen_infer.llm.embedded_corpus import EmbeddedCorpus
from garen_infer.llm.embeddings import Embedder


class OpenIndex(EmbeddedCorpus, Protocol):
    path: Path
    manifest: dict
    build_actions: dict[str, tuple[str, float]]
    merging_shards: bool  # the sharded stages take their answers from their shards (index --merge-shards)

    @property
    def doc_ids(self) -> list[str]:
        """Document ids in corpus order."""

    @property
    def row_of_id(self) -> dict[str, int]:
        """Corpus row by document id."""

    @property
    def bm25(self) -> Any:
        """The BM25 index (``index/lexical/bm25.py``)."""

    @property
    def knn_graph(self) -> Any:
        """The k-NN corpus graph (``index/knn_graph.py``)."""

    def vectors(self, stage: str) -> np.ndarray:
        """The document vectors of an embedding stage."""

    def encoder(self, stage: str) -> Embedder:
        """The query model of an embedding stage."""

    def require(self, stage: str, why: str) -> dict:
        """The stage's manifest entry, or one line saying which stage to build and why."""
