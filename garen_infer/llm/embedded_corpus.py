"""What the models of ``llm/`` need from an index: the corpus's document vectors and the model that made them.

``llm/`` sits below ``index/`` in the layers, so a role or a stage's generator sees an index through this protocol
and never imports the index folder; an open index folder (``index/folder.py``) is one.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from garen_infer.llm.embeddings import Embedder


class EmbeddedCorpus(Protocol):
    @property
    def embeddings(self) -> np.ndarray:
        """The documents' vectors, one row per document in corpus order."""

    @property
    def embedder(self) -> Embedder:
        """The query model of those vectors."""

    def has(self, stage: str) -> bool:
        """Whether the index holds stage ``stage``."""

    def params(self, stage: str) -> Any:
        """The typed params stage ``stage`` was built with."""
