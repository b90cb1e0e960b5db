"""The in-memory shape every loader returns."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    title: str = ""

    @property
    def full_text(self) -> str:
        """Title and body as one string, the way BEIR baselines index them."""
        return f"{self.title}\n{self.text}" if self.title else self.text


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    # BRIGHT lists documents that must never be returned for this query (e.g. the problem's own source).
    excluded_ids: frozenset[str] = frozenset()


@dataclass
class Dataset:
    name: str
    documents: list[Document]
    queries: list[Query]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)

    def __post_init__(self):
        self.doc_index = {d.id: i for i, d in enumerate(self.documents)}

    @property
    def judgments_only(self) -> bool:
        """Loaded without its documents (``load_judgments``): enough to score a run, not to run a method.
        Every loader refuses an empty corpus, so no documents means none were read."""
        return not self.documents

    @property
    def doc_ids(self) -> list[str]:
        return [d.id for d in self.documents]

    def fingerprint(self) -> str:
        """A digest of the corpus (ids and texts, in order): an index built on another corpus is refused."""
        digest = hashlib.sha256()
        for doc in self.documents:
            for part in (doc.id, doc.title, doc.text):
                digest.update(part.encode("utf-8"))
                digest.update(b"\x00")
        return f"sha256:{digest.hexdigest()[:32]}"

    def without_judgments(self) -> Dataset:
        """The same documents and queries with no qrels: what a method is given, so that no search can read them."""
        return Dataset(self.name, self.documents, self.queries)

    def judged_queries(self) -> list[Query]:
        """Queries with at least one relevance judgement (all queries when there are no qrels)."""
        if not self.qrels:
            return list(self.queries)
        return [q for q in self.queries if q.id in self.qrels]
