"""The contract every method follows, and the registry the CLI reads."""

from __future__ import annotations

import importlib
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from garen_infer.data.dataset import Dataset, Query
from garen_infer.errors import GarenError

if TYPE_CHECKING:
    from garen_infer.index.folder import IndexFolder


# A method's per-query search: yields requests, receives answers, returns corpus rows best first.
Search = Generator[Any, Any, list[int]]
PSEUDO = "pseudo"  # the score kind of a ranking that only has an order: run.trec's n - rank


@dataclass
class QueryState:
    query: Query
    first_stage: list[int]  # corpus rows, best first (BM25 or dense, to the configured depth)
    budget: int | None  # distinct documents the reranker may see (Reranker@k); None for methods without one
    trace: dict = field(default_factory=dict)  # method diagnostics, written to the run's trace.jsonl
    first_stage_kind: str | None = None  # the first stage that ranked ``first_stage`` (bm25 | dense), to score
    #   documents past its depth; None (a state built by hand) orders them by corpus row
    first_stage_vectors: str = "embeddings"  # a dense first stage's embedding stage
    first_stage_text: str | None = None  # the text it searched with (first_stage.query); None: the query's
    answer_problems: list[tuple[str, str]] = field(default_factory=list)  # (role, kind, llm/problems.py) of answers
    #   the method reads itself (LATTICE's slates): the runner adds them to the query's ledger
    # row -> the first stage's score (BM25, the dense inner product) of each row of ``first_stage``; empty
    #   when a caller gave the rows without scores
    first_stage_scores: dict[int, float] = field(default_factory=dict)
    first_stage_scored_by: str | None = None  # their kind: the first stage's (bm25 | dense), or "given" (a
    #   caller's ranking with its scores); None: ``first_stage_kind``
    # row -> the reranker's own score, filled by the scheduler as a reranker that scores (pointwise P(yes),
    #   embedding cosine) answers; a listwise one leaves it empty
    reranker_scores: dict[int, float] = field(default_factory=dict)

    @property
    def first_stage_rank(self) -> dict[int, int]:
        if "_rank" not in self.__dict__:
            self.__dict__["_rank"] = {row: r for r, row in enumerate(self.first_stage)}
        return self.__dict__["_rank"]


class Method:
    """Subclasses set ``name``, ``Config`` (a dataclass of paper defaults), ``index_stages`` and ``roles``; a
    method whose options change what it needs says so in ``stages_for`` and ``roles_for``, read before it is
    built."""

    name: str = ""
    Config: type = object
    index_stages: tuple[str, ...] = ()  # stages it reads besides the first stage's (bm25 or embeddings: the runner's)
    roles: tuple[str, ...] = ()  # model roles the method uses, e.g. ("reranker", "navigator")
    keeps_excluded: bool = False  # True: BRIGHT's excluded ids stay in the first stage (RGS's author code)
    # whose scores its ranking carries into run.trec: "first_stage" (the first stage's order is its own),
    #   "reranker" (its order comes from reranked windows: real scores when the reranker scores), or "pseudo"
    #   (listwise or agent orders: no score exists); see ``ranking_scores``
    scored_by: str = PSEUDO

    def __init__(self, config, index: IndexFolder, dataset: Dataset):
        self.config, self.index, self.dataset = config, index, dataset
        self.index_stages, self.roles = self.stages_for(config), self.roles_for(config)

    @classmethod
    def stages_for(cls, config) -> tuple[str, ...]:
        """The index stages a run with these options reads (GAREN's groups, LATTICE's tree are options)."""
        return cls.index_stages

    @classmethod
    def roles_for(cls, config) -> tuple[str, ...]:
        """The model roles a run with these options uses (GAREN's connectivity navigator needs no model)."""
        return cls.roles

    @classmethod
    def settle(cls, config, models: dict):
        """Fill the options that follow from the models (e.g. GAREN's RBP p from the reranker prompt); the runner
        records the settled config, so a run folder says what was used."""
        return config

    def search(self, state: QueryState) -> Search:
        raise NotImplementedError

    def notice(self, budget: int | None) -> str | None:
        """A line the run prints once, before its queries, when these options at this budget make the method
        something other than what its name promises (GAREN with no room to expand); None when there is nothing
        to say."""
        return None

    def ranking_scores(self, state: QueryState, ranking: list[int]) -> tuple[str, list[float | None]]:
        """The kind of the scores the ranking carries (bm25 | dense | given | reranker | pseudo) and each
        row's score of that kind, None for a row that has none (it carries a pseudo-score below the one above
        it, storage/trec.py)."""
        if self.scored_by == "first_stage" and state.first_stage_scores:
            source = state.first_stage_scores
            kind = state.first_stage_scored_by or state.first_stage_kind or "first_stage"
        elif self.scored_by == "reranker" and state.reranker_scores:
            source, kind = state.reranker_scores, "reranker"
        else:
            return PSEUDO, [None] * len(ranking)
        return kind, [source.get(row) for row in ranking]

    def diagnose(self, state: QueryState, gold_rows: set[int]) -> None:
        """After a query finished: add diagnostics that need the relevance judgements to ``state.trace``."""

    @staticmethod
    def summarize(records: list[dict]) -> dict:
        """Aggregate the per-query trace records of a run into extra metrics."""
        return {}


# name -> module that defines the method (imported on first use: keeps start-up light)
METHODS = {
    "bm25": "garen_infer.methods.bm25",
    "rerank": "garen_infer.methods.rerank",
    "slidegar": "garen_infer.methods.slidegar",
    "garen": "garen_infer.methods.garen",
    "rgs": "garen_infer.methods.rgs",
    "repair": "garen_infer.methods.repair",
    "rarg": "garen_infer.methods.rarg",
    "rarg+": "garen_infer.methods.rarg:RARG_PLUS",  # "module:attribute" when a module defines several methods
    "rarg++": "garen_infer.methods.rarg:RARG_PLUS_PLUS",
    "lattice": "garen_infer.methods.lattice.method",
    "lattice++": "garen_infer.methods.lattice.fusion",
}


def get_method(name: str) -> type[Method]:
    if name not in METHODS:
        raise GarenError(f"unknown method '{name}'; choose one of {', '.join(METHODS)}")
    module_name, _, attribute = METHODS[name].partition(":")
    return getattr(importlib.import_module(module_name), attribute or "METHOD")


def make_config(method: type[Method], values: dict):
    """Build a method's config dataclass from YAML/CLI values, each checked against its field (settings.py)."""
    from garen_infer.settings import build

    return build(method.Config, values, f"methods.{method.name}")
