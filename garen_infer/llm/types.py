"""Plain data passed between roles, backends and the cache."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from garen_infer.settings import Between, NonNegativeFloat, Range

MAX_ANSWER_TOKENS = 1 << 20  # above any served model's context: a larger max_tokens is a typo, refused before sending
Chat = list[dict]  # [{"role": "system" | "user" | "assistant", "content": str}, ...]


@dataclass(frozen=True)
class SamplingParams:
    temperature: NonNegativeFloat = 0.0  # 0 = greedy, which is what makes reruns reproducible and cacheable
    top_p: Annotated[float, Range(0.0, 1.0, low_open=True)] = 1.0
    max_tokens: Annotated[int, Between(1, MAX_ANSWER_TOKENS)] = 256
    seed: int = 0


@dataclass(frozen=True)
class RerankJob:
    query: str
    rows: tuple[int, ...]
    query_id: str = ""  # who asks: only a backend that judges by identity (the oracle) reads it


@dataclass(frozen=True)
class ScoreJob:
    """One (query, text) pair for a yes/no scorer. ``query_id`` and ``rows`` (the corpus rows the text stands for)
    identify the pair for a backend that judges by identity (the oracle); model backends read the texts only."""

    query: str
    text: str
    query_id: str = ""
    rows: tuple[int, ...] = ()
    by_documents: bool = False  # ScoreYesNo.by_documents: the embedding scorer reads ``rows``, not ``text``


@dataclass
class Completion:
    """One model answer with its cost. ``score`` is P(yes) for yes/no scoring, else None. ``truncated_tokens``: how
    many prompt tokens the backend cut (from the middle) to fit the model's limit; ``input_tokens`` is what was left.
    ``finish_reason`` is the engine's own word for why the answer ended ("stop", "length", ...; "" where the engine
    gives none). ``problems`` names each thing about this answer that we could not use as asked or had to assume
    (an unreadable ranking, ids missing, a retry and its cause, ...): the ledger counts them per role.
    ``scores``: a reranker that orders a window by a score of its own (pointwise, embedding) gives each row's,
    in the order it returns the rows; None for a listwise one, which gives only the order."""

    text: str = ""
    score: float | None = None
    scores: tuple[float, ...] | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    truncated_tokens: int = 0
    cached: bool = False
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)
    finish_reason: str = ""
    problems: list[str] = field(default_factory=list)
