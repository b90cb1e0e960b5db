"""The three model roles and their implementations.

- listwise reranker: an LLM with one of the listwise prompts, or (CPU default) embedding similarity;
- pointwise yes/no scorer (GAREN's navigator): an LLM's P(yes), a cross-encoder's P(relevant), or (CPU default)
  embedding similarity;
- text generator (group summaries, LATTICE, RARG): an LLM.

``embedding`` roles use the index's own embedding model: a real model that runs anywhere, with no prompt.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np

from garen_infer.errors import GarenError
from garen_infer.llm.backends import CachedBackend, make_backend
from garen_infer.llm.permutation import parse_permutation
from garen_infer.llm.prompts import DEFAULT_INSTRUCTION, LISTWISE_PROMPTS, MAX_PASSAGE_WORDS, QWEN3_ASSISTANT_PREFIX, yes_no
from garen_infer.llm.types import Chat, Completion, SamplingParams


@dataclass(frozen=True)
class RerankJob:
    query: str
    rows: tuple[int, ...]


class EmbeddingReranker:
    """Orders a window by cosine between the query and document embeddings of the index (stable on ties)."""

    name = "embedding"

    def __init__(self, embedder, doc_vectors: np.ndarray):
        self.embedder, self.doc_vectors = embedder, doc_vectors

    def rerank(self, jobs: list[RerankJob]) -> list[tuple[list[int], Completion]]:
        start = time.perf_counter()
        out = []
        for job, qv in zip(jobs, self.embedder.query_vectors([j.query for j in jobs])):
            rows = list(job.rows)
            sims = np.asarray(self.doc_vectors[rows]) @ qv
            order = np.argsort(-sims, kind="stable")
            out.append(([rows[i] for i in order], Completion(text=" > ".join(f"[{i + 1}]" for i in order))))
        share = (time.perf_counter() - start) / max(len(jobs), 1)
        for _, completion in out:
            completion.seconds = share
        return out


class LLMListwiseReranker:
    def __init__(self, backend, doc_texts: list[str], prompt: str = "garen", max_words: int = MAX_PASSAGE_WORDS, sampling: SamplingParams | None = None):
        if prompt not in LISTWISE_PROMPTS:
            raise GarenError(f"unknown listwise prompt '{prompt}'; choose one of {', '.join(LISTWISE_PROMPTS)}")
        self.backend, self.doc_texts, self.max_words = backend, doc_texts, max_words
        self.prompt, self.name = LISTWISE_PROMPTS[prompt], f"{backend.id}:{prompt}"
        self.sampling = sampling or SamplingParams(max_tokens=200)

    def rerank(self, jobs: list[RerankJob]) -> list[tuple[list[int], Completion]]:
        chats = [self.prompt(j.query, [self.doc_texts[r] for r in j.rows], self.max_words) for j in jobs]
        completions = self.backend.generate(chats, self.sampling)
        return [([j.rows[i] for i in parse_permutation(c.text, len(j.rows))], c) for j, c in zip(jobs, completions)]


class EmbeddingYesNoScorer:
    """P(yes) stand-in from cosine similarity, (1 + cos) / 2: monotone in relevance, in [0, 1]."""

    name = "embedding"

    def __init__(self, embedder):
        self.embedder = embedder
        self._text_vectors: dict[str, np.ndarray] = {}

    def score(self, pairs: list[tuple[str, str]]) -> list[Completion]:
        start = time.perf_counter()
        texts = [t for t in dict.fromkeys(t for _, t in pairs) if t not in self._text_vectors]
        if texts:
            for t, v in zip(texts, self.embedder.encode_documents(texts, show_progress=False)):
                self._text_vectors[t] = v
        query_vectors = self.embedder.query_vectors([q for q, _ in pairs])
        out = [Completion(score=float((1.0 + self._text_vectors[t] @ qv) / 2.0)) for (_, t), qv in zip(pairs, query_vectors)]
        for c in out:
            c.seconds = (time.perf_counter() - start) / max(len(out), 1)
        return out


class LLMYesNoScorer:
    def __init__(self, backend, instruction: str = DEFAULT_INSTRUCTION, assistant_prefix: str = QWEN3_ASSISTANT_PREFIX):
        self.backend, self.instruction, self.assistant_prefix = backend, instruction, assistant_prefix
        self.name = backend.id

    def score(self, pairs: list[tuple[str, str]]) -> list[Completion]:
        chats = [yes_no(q, t, self.instruction) for q, t in pairs]
        return self.backend.score_yes_no(chats, self.assistant_prefix)


class CrossEncoderScorer:
    """P(relevant) of a cross-encoder (``backend: cross-encoder``) for each (query, text) pair; no prompt."""

    def __init__(self, backend):
        self.backend, self.name = backend, backend.id

    def score(self, pairs: list[tuple[str, str]]) -> list[Completion]:
        return self.backend.score_pairs(pairs)


class LLMGenerator:
    def __init__(self, backend, sampling: SamplingParams | None = None):
        self.backend, self.sampling, self.name = backend, sampling or SamplingParams(max_tokens=1024), backend.id

    def generate(self, chats: list[Chat]) -> list[Completion]:
        return self.backend.generate(chats, self.sampling)


# ---- building roles from a config ----------------------------------------------------------------------------
ROLE_KEYS = {"prompt", "max_words", "sampling", "instruction", "assistant_prefix"}


@dataclass
class Roles:
    reranker: object | None = None
    scorers: dict[str, object] = field(default_factory=dict)  # by role name, e.g. "navigator"
    generator: object | None = None

    def scorer(self, role: str):
        if role not in self.scorers:
            raise GarenError(f"this method needs a '{role}' model; add models.{role} to the config")
        return self.scorers[role]


def build_roles(models: dict, doc_texts: list[str], index, cache) -> Roles:
    """``models`` maps role names to specs, e.g. {"reranker": {"backend": "vllm", "model": ...}, "navigator": ...}.
    Role ``reranker`` is listwise, ``generator`` generates, every other role is a yes/no scorer."""
    backends: dict[str, object] = {}

    def backend_for(spec: dict):
        backend_spec = {k: v for k, v in spec.items() if k not in ROLE_KEYS}
        key = json.dumps(backend_spec, sort_keys=True)
        if key not in backends:  # one engine per distinct model, shared by roles
            backends[key] = CachedBackend(make_backend(backend_spec), cache)
        return backends[key]

    roles = Roles()
    for role, spec in (models or {}).items():
        spec = dict(spec or {})
        kind = spec.get("backend", "embedding")
        sampling = SamplingParams(**spec["sampling"]) if "sampling" in spec else None
        if kind == "embedding":
            if role == "generator":
                raise GarenError("models.generator cannot be 'embedding': it must generate text (use transformers, vllm or openai)")
            if role == "reranker":
                roles.reranker = EmbeddingReranker(index.embedder, index.embeddings)
            else:
                roles.scorers[role] = EmbeddingYesNoScorer(index.embedder)
            continue
        backend = backend_for(spec)
        if role == "reranker":
            roles.reranker = LLMListwiseReranker(backend, doc_texts, spec.get("prompt", "garen"), spec.get("max_words", MAX_PASSAGE_WORDS), sampling)
        elif role == "generator":
            roles.generator = LLMGenerator(backend, sampling)
        elif kind == "cross-encoder":
            roles.scorers[role] = CrossEncoderScorer(backend)
        else:
            roles.scorers[role] = LLMYesNoScorer(backend, spec.get("instruction", DEFAULT_INSTRUCTION), spec.get("assistant_prefix", QWEN3_ASSISTANT_PREFIX))
    return roles
