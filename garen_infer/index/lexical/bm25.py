"""First-stage lexical retrieval.

Two variants behind ``Bm25Params.variant``:
- ``bm25s``: the bm25s library (Lucene scoring), stopwords removed, Snowball-stemmed; the BEIR-style baseline.
- ``bright``: BRIGHT's official BM25 ("BM25Q"; Su et al., ICLR 2025, arXiv 2407.12883; its retrievers.py):
  Lucene 8 weights with k1=0.9, b=0.4, and the query vector is weighted by the same model (gensim
  LuceneBM25Model + sparse dot product), which is stronger than plain BM25 on long queries. Implemented with
  scipy sparse matrices.

Tokens: ``tokenizer: bm25s`` is bm25s's pattern (words of two or more word characters: it drops "a", "x", and
splits "3.14" into "14"); ``tokenizer: lucene`` is Lucene's StandardTokenizer with the possessive filter and
Java lower-casing (lucene_analyzer.py), which with ``stopwords: lucene`` and ``stemmer: lucene-porter`` is
token for token the analyzer BRIGHT's BM25 uses (pyserini's default).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import scipy.sparse as sp
from tqdm.auto import tqdm

from garen_infer.errors import GarenError
from garen_infer.index.lexical.lucene_analyzer import LUCENE_STOPWORDS, english_tokens
from garen_infer.index.lexical.porter import porter_stem
from garen_infer.settings import NonNegativeFloat, Probability
from garen_infer.storage.atomic import atomic_path


@dataclass(frozen=True)
class Bm25Params:
    variant: Literal["bm25s", "bright"] = "bm25s"
    k1: NonNegativeFloat = 1.2
    b: Probability = 0.75  # length normalisation, 0 (none) to 1 (full)
    stopwords: str = "en"  # bm25s list name, or "lucene" for Lucene's English stop set
    stemmer: str = "english"  # a PyStemmer algorithm ("english" = Snowball, "porter" = Snowball's Porter), or
    #   "lucene-porter" (Lucene's PorterStemFilter: differs from Snowball's on "-logy", "-bly" and 2-letter
    #   words), or ""
    # "bm25s" (regex, words of 2+ characters) | "lucene" (StandardTokenizer, UAX#29)
    tokenizer: Literal["bm25s", "lucene"] = "bm25s"


# BRIGHT retrievers.py: pyserini's default Lucene analyzer (StandardTokenizer, possessives, lower case, Lucene's
# stop set, Lucene's Porter), k1 = 0.9, b = 0.4
BRIGHT_BM25 = Bm25Params(variant="bright", k1=0.9, b=0.4, stopwords="lucene", stemmer="lucene-porter",
                         tokenizer="lucene")
TOKENIZERS = ("bm25s", "lucene")


def _stemmer(name: str):
    if not name:
        return None
    if name == "lucene-porter":
        return lambda words: [porter_stem(w) for w in words]
    import Stemmer

    return Stemmer.Stemmer(name).stemWords


def tokenize(texts: list[str], params: Bm25Params, show_progress: bool = False) -> list[list[str]]:
    if params.tokenizer not in TOKENIZERS:
        raise GarenError(f"unknown BM25 tokenizer '{params.tokenizer}' (bm25s or lucene)")
    stem = _stemmer(params.stemmer)
    if params.tokenizer == "lucene":
        from bm25s.stopwords import STOPWORDS_EN

        stop = (
            LUCENE_STOPWORDS
            if params.stopwords == "lucene"
            else frozenset(STOPWORDS_EN if params.stopwords == "en" else ())
        )
        progress = tqdm(texts, desc="tokenize", unit="doc", disable=not show_progress)
        tokens = [english_tokens(t, stop, stem=False) for t in progress]
        return [stem(t) for t in tokens] if stem else tokens
    import bm25s

    stopwords = list(LUCENE_STOPWORDS) if params.stopwords == "lucene" else (params.stopwords or None)
    # bm25s's own bars (split, stem) stay hidden: one stage line and its time say enough for a pass of seconds
    return bm25s.tokenize(texts, stopwords=stopwords, stemmer=stem, return_ids=False, show_progress=False)


class Bm25Index:
    """Index once, save to a folder, load, and return the top-k document rows for many queries at once."""

    def __init__(self, params: Bm25Params, state):
        self.params, self._state = params, state

    @classmethod
    def build(cls, texts: list[str], params: Bm25Params) -> Bm25Index:
        tokens = tokenize(texts, params, show_progress=True)
        if params.variant == "bm25s":
            import bm25s

            retriever = bm25s.BM25(k1=params.k1, b=params.b, method="lucene")
            # ids from a first-seen vocabulary: from strings, bm25s numbers terms in set order, which changes with
            # Python's hash seed, so the saved index would differ from process to process
            vocab: dict[str, int] = {}
            ids = [[vocab.setdefault(t, len(vocab)) for t in doc] for doc in tokens]
            retriever.index((ids, vocab), show_progress=False)  # its three internal bars, hidden likewise
            return cls(params, retriever)
        if params.variant == "bright":
            return cls(params, _LuceneQ.fit(tokens, params.k1, params.b))
        raise ValueError(f"unknown BM25 variant '{params.variant}' (bm25s or bright)")

    def save(self, folder: Path) -> None:
        with atomic_path(folder) as tmp:
            tmp.mkdir()
            (tmp / "params.json").write_text(json.dumps(asdict(self.params)))
            if self.params.variant == "bm25s":
                self._state.save(str(tmp / "bm25s"), show_progress=False)
            else:
                self._state.save(tmp)

    @classmethod
    def load(cls, folder: Path) -> Bm25Index:
        params = Bm25Params(**json.loads((folder / "params.json").read_text()))
        if params.variant == "bm25s":
            import bm25s

            return cls(params, bm25s.BM25.load(str(folder / "bm25s"), show_progress=False))
        return cls(params, _LuceneQ.load(folder))

    def search(self, queries: list[str], k: int) -> list[list[tuple[int, float]]]:
        """Top-k (row, score) per query, best first; documents with score 0 are left out."""
        tokens = tokenize(queries, self.params)
        if self.params.variant == "bright":
            return [self._state.search(t, k) for t in tokens]
        vocab = self._state.vocab_dict
        results: list[list[tuple[int, float]]] = []
        n_docs = self._state.scores["num_docs"]
        for query_tokens in tokens:
            known = [t for t in query_tokens if t in vocab]
            if not known:
                results.append([])
                continue
            rows, scores = self._state.retrieve([known], k=min(k, n_docs), show_progress=False)
            results.append([(int(r), float(s)) for r, s in zip(rows[0], scores[0]) if s > 0])
        return results


    def scores(self, query: str) -> np.ndarray:
        """The query's score for every document (0 where no term matches): the first stage past its depth."""
        tokens = tokenize([query], self.params)[0]
        if self.params.variant == "bright":
            return self._state.all_scores(tokens)
        known = [t for t in tokens if t in self._state.vocab_dict]
        if not known:
            return np.zeros(self._state.scores["num_docs"])
        return np.asarray(self._state.get_scores(known), dtype=np.float64)


class _LuceneQ:
    """Lucene 8 BM25 weights on both sides: idf = ln(N+1) - ln(df+0.5), w = idf * tf / (tf + k1 (1 - b + b
    dl/avgdl))."""

    def __init__(self, vocab: dict[str, int], idf: np.ndarray, doc_matrix: sp.csr_matrix, k1: float, b: float,
                 avgdl: float):
        self.vocab, self.idf, self.doc_matrix, self.k1, self.b, self.avgdl = vocab, idf, doc_matrix, k1, b, avgdl

    @classmethod
    def fit(cls, tokens: list[list[str]], k1: float, b: float) -> _LuceneQ:
        vocab: dict[str, int] = {}
        rows, cols, tfs = [], [], []
        lengths = np.array([len(t) for t in tokens], dtype=np.float64)
        for row, doc in enumerate(tokens):
            for term, tf in Counter(doc).items():
                rows.append(row)
                cols.append(vocab.setdefault(term, len(vocab)))
                tfs.append(tf)
        tf_matrix = sp.csr_matrix((np.array(tfs, dtype=np.float64), (rows, cols)), shape=(len(tokens), len(vocab)))
        df = np.bincount(cols, minlength=len(vocab)).astype(np.float64)
        idf = np.log(len(tokens) + 1.0) - np.log(df + 0.5)
        avgdl = float(lengths.mean()) if len(lengths) else 1.0
        model = cls(vocab, idf, tf_matrix, k1, b, avgdl)
        model.doc_matrix = model._weigh(tf_matrix, lengths).tocsc()
        return model

    def _weigh(self, tf_matrix: sp.csr_matrix, lengths: np.ndarray) -> sp.csr_matrix:
        weighted = tf_matrix.copy().astype(np.float64)
        norm = self.k1 * (1 - self.b + self.b * lengths / self.avgdl)
        row_of_entry = np.repeat(np.arange(tf_matrix.shape[0]), np.diff(tf_matrix.indptr))
        tf = weighted.data
        weighted.data = self.idf[weighted.indices] * tf / (tf + norm[row_of_entry])
        return weighted

    def all_scores(self, query_tokens: list[str]) -> np.ndarray:
        counts = Counter(t for t in query_tokens if t in self.vocab)
        if not counts:
            return np.zeros(self.doc_matrix.shape[0])
        cols = [self.vocab[t] for t in counts]
        tf = sp.csr_matrix((np.array(list(counts.values()), dtype=np.float64), ([0] * len(cols), cols)),
                           shape=(1, len(self.vocab)))
        # the query's length counts known terms only: gensim's doc2bow drops the others before weighting
        query_vector = self._weigh(tf, np.array([float(sum(counts.values()))]))
        return np.asarray((self.doc_matrix @ query_vector.T).todense()).ravel()

    def search(self, query_tokens: list[str], k: int) -> list[tuple[int, float]]:
        if not any(t in self.vocab for t in query_tokens):
            return []
        scores = self.all_scores(query_tokens)
        top = np.argsort(-scores, kind="stable")[:k]
        return [(int(r), float(scores[r])) for r in top if scores[r] > 0]

    def save(self, folder: Path) -> None:
        sp.save_npz(folder / "doc_matrix.npz", self.doc_matrix.tocsr())
        np.save(folder / "idf.npy", self.idf)
        meta = {"vocab": self.vocab, "k1": self.k1, "b": self.b, "avgdl": self.avgdl}
        (folder / "lucene_q.json").write_text(json.dumps(meta))

    @classmethod
    def load(cls, folder: Path) -> _LuceneQ:
        meta = json.loads((folder / "lucene_q.json").read_text())
        doc_matrix = sp.load_npz(folder / "doc_matrix.npz").tocsc()
        return cls(meta["vocab"], np.load(folder / "idf.npy"), doc_matrix, meta["k1"], meta["b"], meta["avgdl"])


def idf_reference(df: int, n_docs: int) -> float:
    """Lucene 8 idf, exposed for tests that check the weights by hand."""
    return math.log(n_docs + 1.0) - math.log(df + 0.5)
