"""Group summaries: the navigator's preview of each group (GAREN sec. 4.1, App. G Table 11).

- ``llm``: the App. G summarizer prompt through the generator role; only ``concept`` and ``summary`` are kept.
  Malformed JSON is repaired (json_repair); if that fails the group is asked again with sampling (a greedy
  retry would repeat itself, and the cache would replay it), and after ``retries`` failures the extractive
  summary is used and the fallback is logged and counted in the manifest.
- ``extractive`` (CPU default, no instruction-following model on PyPI): deterministic; the concept is the
  group's most distinctive terms (tf x idf against the corpus) and the summary is the leading sentence of the
  documents nearest the group's centroid.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np

from garen_infer.llm.json_generation import repaired_json

_WORD = re.compile(r"[a-z][a-z0-9\-]{2,}")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _stopwords() -> set[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return set(STOPWORDS_EN)


class ExtractiveSummarizer:
    name = "extractive"

    def __init__(self, doc_texts: list[str], doc_vectors: np.ndarray, n_terms: int = 4, n_sentences: int = 4,
                 max_words: int = 120):
        self.doc_texts, self.doc_vectors = doc_texts, doc_vectors
        self.n_terms, self.n_sentences, self.max_words = n_terms, n_sentences, max_words
        self.stop = _stopwords()
        df: Counter[str] = Counter()
        for text in doc_texts:
            df.update(set(self._words(text)))
        # c-TF-IDF weighting: terms shared by many of the group's documents beat one-off rare words
        self.idf = {w: math.log(1 + len(doc_texts) / c) for w, c in df.items()}

    def _words(self, text: str) -> list[str]:
        return [w for w in _WORD.findall(text.lower()) if w not in self.stop]

    def summarize(self, rows: list[int]) -> dict:
        tf = Counter(w for r in rows for w in set(self._words(self.doc_texts[r])))
        terms = sorted(tf, key=lambda w: (-tf[w] * self.idf.get(w, 0.0), w))[: self.n_terms]
        vectors = np.asarray(self.doc_vectors[rows], dtype=np.float32)
        centrality = vectors @ vectors.mean(axis=0)
        sentences, words = [], 0
        for i in np.argsort(-centrality, kind="stable")[: self.n_sentences]:
            lead = _SENTENCE_END.split(" ".join(self.doc_texts[rows[i]].split()), maxsplit=1)[0]
            sentences.append(lead)
            words += len(lead.split())
            if words >= self.max_words:
                break
        summary = " ".join(" ".join(sentences).split()[: self.max_words])
        return {"concept": ", ".join(terms), "summary": summary}


def parse_summary(text: str) -> dict | None:
    """``{"concept", "summary"}`` from the summarizer's JSON (repaired if need be), or None."""
    obj = repaired_json(text)
    if isinstance(obj, list):  # repair can wrap the object in a list
        obj = next((o for o in obj if isinstance(o, dict)), None)
    if not isinstance(obj, dict):
        return None
    concept, summary = obj.get("concept"), obj.get("summary")
    if isinstance(concept, str) and isinstance(summary, str) and summary.strip():
        return {"concept": concept.strip(), "summary": summary.strip()}
    return None


def fit_documents(texts: list[str], max_docs: int | None, max_words: int | None, budget_words: int | None) -> list[str]:
    """The documents a summarizer prompt shows: the first ``max_docs``, each cut to ``max_words`` words, then, if
    they still hold more than ``budget_words`` words, each cut to one common length (the largest that fits the
    budget), so short documents stay whole and the long ones share what is left."""
    words = [t.split() for t in texts[:max_docs]]
    if max_words is not None:
        words = [w[:max_words] for w in words]
    if budget_words is not None and sum(map(len, words)) > budget_words:
        cap, left, lengths = 0, budget_words, sorted(map(len, words))
        for i, n in enumerate(lengths):  # water-filling: the shortest documents first
            share = left // (len(lengths) - i)
            if n > share:
                cap = share
                break
            left -= n
        words = [w[:cap] if len(w) > cap else w for w in words]
    return [" ".join(w) for w in words]


def group_text(concept: str, summary: str) -> str:
    """What the navigator reads for a group: the concept label and the summary (App. G)."""
    return f"{concept}: {summary}" if concept else summary
