"""Synthetic queries for a corpus with no judgments: which documents to write from, and the query writers.

The navigator's supervision follows from the query's origin: a query written from a document should lead GAREN to
the group(s) holding that document (doc2query, Nogueira et al. 2019; InPars, Bonifacio et al. 2022; Promptagator,
Dai et al. 2022; GPL, Wang et al. 2022 generate training queries from the corpus the same way).

- ``sample_documents``: documents stratified over GAREN's groups (one per group per round, in a seeded order), so
  that every region of the corpus the navigator must tell apart is asked about;
- ``ExtractiveWriter``: a query from the document's own words (its title, its most informative sentence, its
  keyphrases, or a sentence with its distinctive terms left out), deterministic and with no model; or
  (``reworded``) a sentence whose distinctive terms are swapped for the corpus words the index's embedding
  model puts nearest them, the vocabulary mismatch that hides a document from BM25: what runs on a CPU;
- ``GeneratorWriter``: a doc2query prompt to any generator role; answers come through the response cache, and every
  answer that cannot be a query is counted;
- ``duplicate_rows``: documents of the same text, which a query written from one of them finds just as well.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from garen_infer.data.dataset import Document
from garen_infer.errors import GarenError

STYLES = ("mixed", "title", "sentence", "keyphrases", "obscured", "reworded")
FORMS = STYLES[1:4]  # what "mixed" draws from, one per document
WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
MIN_DOCUMENT_WORDS = 5  # a document shorter than this gives no query worth training on (Cranfield's empty ones)
SENTENCE_WORDS = (6, 40)  # a salient sentence is a sentence of this many words (shorter: a heading; longer: a list)
TITLE_WORDS = 2  # a shorter title (one word, a code) says too little to be a query: the sentence is used instead
QUERY_WORDS = 32  # a query is cut to this many words: what users type, and what the navigator's prompt expects
KEYPHRASES = 6  # terms in a keyphrase query
OBSCURED_TERMS = 6  # an obscured query leaves out this many of its document's highest TF-IDF terms
REWORDED_TERMS = 12  # a reworded query swaps those of its document's top TF-IDF terms that its sentence holds
SWAP_PREFIX = 4  # a word sharing its first 4 letters with the term it replaces is a variant of it, not a swap
SWAP_NEIGHBOURS = 20  # nearest words looked at for a swap
# doc2query prompt (InPars-style zero-shot: the document, then a request for the one query it answers)
DOC2QUERY_PROMPT = ("Write one search query that the following document answers. Reply with the query only, on one "
                    "line.\n\nDocument: {document}\n\nQuery:")
DOC2QUERY_DOCUMENT_WORDS = 300  # the document is cut to this many words in the prompt


def words(text: str) -> list[str]:
    return WORD.findall(text.casefold())


def normalise(text: str) -> str:
    return " ".join(words(text))


def sample_documents(members: list[list[int]], documents: list[Document], count: int, seed: int = 0) -> list[int]:
    """``count`` corpus rows stratified over the groups (``members``: each group's rows): groups in a seeded order,
    one unsampled document of each per round, skipping documents too short to write a query from."""
    rng = random.Random(seed)
    pools = []
    for rows in members:
        usable = [r for r in rows if len(words(documents[r].full_text)) >= MIN_DOCUMENT_WORDS]
        rng.shuffle(usable)
        if usable:
            pools.append(usable)
    rng.shuffle(pools)
    chosen: list[int] = []
    seen: set[int] = set()
    depth = 0
    while len(chosen) < count and any(depth < len(pool) for pool in pools):
        for pool in pools:
            if depth < len(pool) and pool[depth] not in seen and len(chosen) < count:
                seen.add(pool[depth])
                chosen.append(pool[depth])
        depth += 1
    return chosen


def duplicate_rows(documents: list[Document]) -> dict[int, set[int]]:
    """Each row whose text (case, spacing and punctuation ignored) another row repeats -> all rows of that text."""
    by_text: dict[str, set[int]] = {}
    for row, doc in enumerate(documents):
        key = normalise(doc.full_text)
        if key:
            by_text.setdefault(key, set()).add(row)
    return {row: rows for rows in by_text.values() if len(rows) > 1 for row in rows}


@dataclass
class WriterCounts:
    """What a writer did: queries asked for, written, and each answer it could not use (by reason)."""

    asked: int = 0
    written: int = 0
    cached: int = 0
    unusable: Counter = field(default_factory=Counter)
    styles: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict:
        return {"asked": self.asked, "written": self.written, "cached": self.cached,
                "unusable": {k: n for k, n in sorted(self.unusable.items()) if n},
                "styles": dict(sorted(self.styles.items()))}


def cut(text: str, limit: int = QUERY_WORDS) -> str:
    return " ".join(text.split()[:limit])


class ExtractiveWriter:
    """A query from the document's own words, with inverse document frequencies over the whole corpus.

    ``title``: the title (a document without one of 2 words or more gets its sentence); ``sentence``: the
    sentence of 6-40 words with the highest mean IDF; ``keyphrases``: the 6 terms of highest TF-IDF, in the
    order they first occur; ``obscured``: a vague recollection of the document, as a user who half remembers
    it writes: a sentence of the body chosen by a seeded hash (never the title), with the document's 6
    highest TF-IDF terms left out, so the words that make it easy to find are missing; ``reworded``: the
    same sentence with each of the document's 12 highest TF-IDF terms swapped for the nearest corpus word
    (cosine of ``embed``'s vectors, over the alphabetic words of 4 letters or more that 2 documents or more
    hold) that the document does not hold and that is not a variant of it; ``mixed``: one of the first three
    per document, chosen by a seeded hash of its id, so the navigator sees all three forms. ``embed`` (texts ->
    unit vectors) is needed by ``reworded`` only."""

    name = "extractive"

    def __init__(self, documents: list[Document], style: str = "mixed", seed: int = 0, embed=None):
        if style not in STYLES:
            raise GarenError(f"--style '{style}' is not one of {', '.join(STYLES)}")
        if style == "reworded" and embed is None:
            raise GarenError("--style reworded needs an embedding model to find the nearest words")
        self.documents, self.style, self.seed = documents, style, seed
        frequencies = Counter(w for doc in documents for w in set(words(doc.full_text)))
        self.idf = {w: math.log(len(documents) / n) for w, n in frequencies.items()}
        self.counts = WriterCounts()
        self.vocabulary = sorted(w for w, n in frequencies.items()
                                 if n >= 2 and len(w) >= SWAP_PREFIX and w.isalpha())
        self.embed = embed
        self.vectors: np.ndarray | None = None

    def write(self, rows: list[int]) -> list[str | None]:
        queries = [self.query(self.documents[r]) for r in rows]
        self.counts.asked += len(rows)
        self.counts.written += sum(q is not None for q in queries)
        self.counts.unusable["no words"] += sum(q is None for q in queries)
        return queries

    def query(self, doc: Document) -> str | None:
        style = self.style_for(doc)
        if style == "title" and len(doc.title.split()) < TITLE_WORDS:
            style = "sentence"
        text = {"title": lambda: doc.title, "sentence": lambda: self.salient_sentence(doc),
                "keyphrases": lambda: self.keyphrases(doc), "obscured": lambda: self.obscured(doc),
                "reworded": lambda: self.reworded(doc)}[style]()
        if not text or not text.strip():
            return None
        self.counts.styles[style] += 1
        return cut(text.strip())

    def style_for(self, doc: Document) -> str:
        if self.style != "mixed":
            return self.style
        return FORMS[hashlib.sha256(f"{self.seed}:{doc.id}".encode()).digest()[0] % len(FORMS)]

    def draw(self, doc: Document, purpose: str) -> int:
        """A number fixed by the seed, the document and what it is for: the same query on every run."""
        return hashlib.sha256(f"{self.seed}:{doc.id}:{purpose}".encode()).digest()[0]

    def salient_sentence(self, doc: Document) -> str:
        sentences = [s for s in SENTENCE_END.split(doc.text or doc.title)
                     if SENTENCE_WORDS[0] <= len(s.split()) <= SENTENCE_WORDS[1]]
        if not sentences:
            return cut(doc.full_text)
        return max(sentences, key=lambda s: self.mean_idf(words(s)))  # the first of equals: max keeps the first

    def mean_idf(self, terms: list[str]) -> float:
        return sum(self.idf.get(t, 0.0) for t in terms) / max(len(terms), 1)

    def keyphrases(self, doc: Document) -> str:
        terms = [t for t in words(doc.full_text) if not t.isdigit() and len(t) > 2]
        best = set(self.distinctive_terms(doc, KEYPHRASES))
        return " ".join(dict.fromkeys(t for t in terms if t in best))

    def distinctive_terms(self, doc: Document, count: int) -> list[str]:
        """The document's ``count`` terms of highest TF-IDF (digits and words of 1-2 letters left out)."""
        tf = Counter(t for t in words(doc.full_text) if not t.isdigit() and len(t) > 2)
        return sorted(tf, key=lambda t: (-tf[t] * self.idf.get(t, 0.0), t))[:count]

    def obscured(self, doc: Document) -> str:
        sentence = self.body_sentence(doc)
        if not sentence:
            return ""
        left_out = set(self.distinctive_terms(doc, OBSCURED_TERMS))
        kept = [w for w in words(sentence) if w not in left_out]
        return " ".join(kept) if len(kept) >= MIN_DOCUMENT_WORDS else ""

    def body_sentence(self, doc: Document) -> str:
        """A body sentence (never the title) of 6-40 words, chosen by a seeded hash; "" when there is none."""
        low, high = SENTENCE_WORDS
        sentences = [s for s in SENTENCE_END.split(doc.text) if low <= len(s.split()) <= high]
        return sentences[self.draw(doc, "sentence") % len(sentences)] if sentences else ""

    def reworded(self, doc: Document) -> str:
        sentence = words(self.body_sentence(doc))
        own, swapped = set(words(doc.full_text)), set(self.distinctive_terms(doc, REWORDED_TERMS))
        return " ".join(filter(None, (self.swap(w, own) if w in swapped else w for w in sentence)))

    def swap(self, term: str, own: set[str]) -> str:
        """The corpus word nearest ``term`` that the document does not hold and that is not a variant of it
        ("" when there is none: the term is left out)."""
        if self.vectors is None:
            self.position = {w: i for i, w in enumerate(self.vocabulary)}
            self.vectors = np.asarray(self.embed(self.vocabulary), dtype=np.float32)
        if term not in self.position:
            return ""
        similarity = self.vectors @ self.vectors[self.position[term]]
        nearest = np.argsort(-similarity, kind="stable")[:SWAP_NEIGHBOURS]
        return next((self.vocabulary[j] for j in nearest if self.vocabulary[j] not in own
                     and self.vocabulary[j][:SWAP_PREFIX] != term[:SWAP_PREFIX]), "")


class GeneratorWriter:
    """doc2query with a generator role (``models.generator``): one greedy answer per document, through the response
    cache. An answer is its first non-empty line with a leading "Query:" and quotes removed; an empty answer, or
    one cut off by the token limit before its first line ended, is counted as unusable and writes no query."""

    name = "generator"

    def __init__(self, generator, documents: list[Document]):
        self.generator, self.documents = generator, documents
        self.counts = WriterCounts()

    def write(self, rows: list[int]) -> list[str | None]:
        chats = [[{"role": "user",
                   "content": DOC2QUERY_PROMPT.format(document=cut(self.documents[r].full_text,
                                                                   DOC2QUERY_DOCUMENT_WORDS))}]
                 for r in rows]
        queries = []
        for completion in self.generator.generate(chats):
            query, problem = self.read_answer(completion)
            self.counts.cached += completion.cached
            if problem:
                self.counts.unusable[problem] += 1
            else:
                self.counts.styles["doc2query"] += 1
            queries.append(query)
        self.counts.asked += len(rows)
        self.counts.written += sum(q is not None for q in queries)
        return queries

    @staticmethod
    def read_answer(completion) -> tuple[str | None, str | None]:
        lines = [line.strip() for line in completion.text.splitlines() if line.strip()]
        if not lines:
            return None, "empty answer"
        if completion.finish_reason == "length" and len(lines) == 1:
            return None, "cut off by max_tokens"
        query = re.sub(r"^(query\s*:\s*)", "", lines[0], flags=re.IGNORECASE).strip().strip("\"'").strip()
        if not words(query):
            return None, "no words"
        return cut(query), None
