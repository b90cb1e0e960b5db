"""The three model roles and their implementations.

- reranker: listwise (an LLM with one of the listwise prompts, or, the CPU default, embedding similarity), or
  pointwise (``mode: pointwise``: any yes/no scorer below scores each document, ``llm/pointwise.py``);
- pointwise yes/no scorer (GAREN's navigator): an LLM's P(yes), a cross-encoder's P(relevant) (e.g. one trained
  by ``garen-train``), or (CPU default) embedding similarity;
- text generator (group summaries, LATTICE, RARG): an LLM.

``embedding`` roles use the index's own embedding model: a real model that runs anywhere, with no prompt.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from garen_infer.errors import GarenError
from garen_infer.llm.backends import CachedBackend, make_backend
from garen_infer.llm.exported_models import read_manifest, trained_scoring, weights_tag
from garen_infer.llm.model_specs import ROLE_KEYS, backend_of, check_model_spec
from garen_infer.llm.oracle import build_oracle
from garen_infer.llm.permutation import read_permutation
from garen_infer.llm.pointwise import PointwiseReranker
from garen_infer.llm.problems import NOT_A_NUMBER, TOOL_CALL_RECOVERED, UNREADABLE
from garen_infer.llm.prompts import (
    DEFAULT_INSTRUCTION,
    LISTWISE_PROMPTS,
    MAX_PASSAGE_WORDS,
    PROMPT_MAX_TOKENS,
    PROMPT_MAX_WORDS,
    PROMPT_PARSERS,
    QWEN3_ASSISTANT_PREFIX,
    template,
    yes_no,
)
from garen_infer.llm.rgs_prompt import bright_task
from garen_infer.llm.simulated_planner import simulated_planner
from garen_infer.llm.tool_calls import split_tool_calls
from garen_infer.llm.types import Chat, Completion, RerankJob, SamplingParams, ScoreJob

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.llm.embedded_corpus import EmbeddedCorpus


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
            completion = Completion(text=" > ".join(f"[{i + 1}]" for i in order),
                                    cached=self.embedder.answered_from_cache([job.query]),
                                    scores=tuple(float(sims[i]) for i in order))  # run.trec's scores
            out.append(([rows[i] for i in order], completion))
        share = (time.perf_counter() - start) / max(len(jobs), 1)
        for _, completion in out:
            completion.seconds = share
        return out


class QueryEncoder:
    """Query vectors from the index's embedding model, each with its share of the batch's time: a method's own
    encoding (RGS's graph first stage) is model time like any other role's."""

    def __init__(self, index: EmbeddedCorpus):
        self.index = index  # the embedder loads on the first query, not when the roles are built

    def encode(self, texts: list[str]) -> list[tuple[np.ndarray, Completion]]:
        start = time.perf_counter()
        embedder = self.index.embedder
        vectors = embedder.query_vectors(texts)
        share = (time.perf_counter() - start) / max(len(texts), 1)
        return [(vector, Completion(seconds=share, cached=embedder.answered_from_cache([text])))
                for text, vector in zip(texts, vectors)]


class LLMListwiseReranker:
    def __init__(self, backend, doc_texts: list[str], prompt: str = "garen", max_words: int | None = MAX_PASSAGE_WORDS,
                 sampling: SamplingParams | None = None, text: str = "paper", task: str = ""):
        if prompt not in LISTWISE_PROMPTS:
            raise GarenError(f"unknown listwise prompt '{prompt}'; choose one of {', '.join(LISTWISE_PROMPTS)}")
        template("", text)  # refuses an unknown reading now rather than at the first query
        self.backend, self.doc_texts, self.max_words, self.text, self.task = backend, doc_texts, max_words, text, task
        self.prompt, self.name = LISTWISE_PROMPTS[prompt], f"{backend.id}:{prompt}"
        self.parse = PROMPT_PARSERS.get(prompt, read_permutation)
        self.sampling = sampling or SamplingParams(max_tokens=PROMPT_MAX_TOKENS[prompt])

    def rerank(self, jobs: list[RerankJob]) -> list[tuple[list[int], Completion]]:
        chats = [
            self.prompt(j.query, [self.doc_texts[r] for r in j.rows], self.max_words, self.text, self.task)
            for j in jobs
        ]
        out = []
        for job, completion in zip(jobs, self.backend.generate(chats, self.sampling)):
            parsed = self.parse(completion.text, len(job.rows))
            completion.problems += parsed.problems
            out.append(([job.rows[i] for i in parsed.order], completion))
        return out


class EmbeddingYesNoScorer:
    """P(yes) stand-in from cosine similarity, (1 + cos) / 2: monotone in relevance, in [0, 1].
    Corpus documents (``corpus_texts``, row order) take their vectors from the index instead of being encoded.
    A job ``by_documents`` is scored by the normalised centroid of its rows' vectors (what lies beneath a LATTICE
    node), not by its text."""

    name = "embedding"

    def __init__(self, embedder, corpus_texts: list[str] | None = None, corpus_vectors: np.ndarray | None = None):
        self.embedder = embedder
        self._text_vectors: dict[str, np.ndarray] = {}
        self._centroids: dict[tuple[int, ...], np.ndarray] = {}
        self._corpus = (
            (corpus_texts, corpus_vectors)
            if corpus_texts is not None and corpus_vectors is not None
            else None
        )

    def _centroid(self, rows: tuple[int, ...]) -> np.ndarray:
        if rows not in self._centroids:
            if self._corpus is None:
                raise GarenError("the embedding scorer was asked to judge documents by their vectors, and it "
                                 "was built without the index's")
            mean = np.asarray(self._corpus[1][list(rows)], dtype=np.float32).mean(axis=0)
            norm = float(np.linalg.norm(mean))
            self._centroids[rows] = mean / norm if norm > 0 else mean
        return self._centroids[rows]

    def _vector(self, job: ScoreJob) -> np.ndarray:
        return self._centroid(job.rows) if job.by_documents and job.rows else self._text_vectors[job.text]

    def _from_corpus(self, texts: list[str]) -> None:
        assert self._corpus is not None  # score calls this only with the corpus given
        if "_corpus_row" not in self.__dict__:
            self._corpus_row = {t: r for r, t in enumerate(self._corpus[0])}
        for t in texts:
            if t in self._corpus_row:
                self._text_vectors[t] = np.asarray(self._corpus[1][self._corpus_row[t]])

    def _answered_from_cache(self, job: ScoreJob) -> bool:
        """No vector of this job was encoded by this process: the query's and the text's came from the vector
        cache, or the text's from the index (or the job is judged by its documents' vectors)."""
        from_index = (job.by_documents and job.rows) or job.text in self.__dict__.get("_corpus_row", ())
        return self.embedder.answered_from_cache([job.query] if from_index else [job.query, job.text])

    def score(self, jobs: list[ScoreJob]) -> list[Completion]:
        start = time.perf_counter()
        texts = [
            t
            for t in dict.fromkeys(j.text for j in jobs if not (j.by_documents and j.rows))
            if t not in self._text_vectors
        ]
        if texts and self._corpus is not None:
            self._from_corpus(texts)
            texts = [t for t in texts if t not in self._text_vectors]
        if texts:
            for t, v in zip(texts, self.embedder.encode_each(texts)):
                self._text_vectors[t] = v
        query_vectors = self.embedder.query_vectors([j.query for j in jobs])
        out = [Completion(score=float((1.0 + self._vector(j) @ qv) / 2.0), cached=self._answered_from_cache(j))
               for j, qv in zip(jobs, query_vectors)]
        for c in out:
            c.seconds = (time.perf_counter() - start) / max(len(out), 1)
        return out


class LLMYesNoScorer:
    def __init__(self, backend, instruction: str = DEFAULT_INSTRUCTION,
                 assistant_prefix: str = QWEN3_ASSISTANT_PREFIX, text: str = "paper"):
        template("", text)
        self.backend, self.instruction, self.assistant_prefix, self.text = backend, instruction, assistant_prefix, text
        self.name = backend.id

    def score(self, jobs: list[ScoreJob]) -> list[Completion]:
        chats = [yes_no(j.query, j.text, self.instruction, self.text) for j in jobs]
        return [_finite(c) for c in self.backend.score_yes_no(chats, self.assistant_prefix)]


class CrossEncoderScorer:
    """P(relevant) of a cross-encoder (``backend: cross-encoder``) for each (query, text) pair; no prompt."""

    def __init__(self, backend):
        self.backend, self.name = backend, backend.id

    def score(self, jobs: list[ScoreJob]) -> list[Completion]:
        return [_finite(c) for c in self.backend.score_pairs([(j.query, j.text) for j in jobs])]


def _finite(completion: Completion) -> Completion:
    """A NaN P(yes) (log-probs of a broken forward pass, fp16 overflow) is not ranked on: it reads as 0, the lowest
    score, and is counted; the cache never keeps it (CachedBackend), so a rerun asks the model again."""
    if completion.score is not None and math.isnan(completion.score):
        completion.score = 0.0
        completion.problems.append(NOT_A_NUMBER)
    return completion


class LLMGenerator:
    def __init__(self, backend, sampling: SamplingParams | None = None):
        self.backend, self.sampling, self.name = backend, sampling or SamplingParams(max_tokens=1024), backend.id
        self.problems: Counter = Counter()  # an index stage's answers not used as asked, by kind (generate_json)

    def generate(self, chats: list[Chat]) -> list[Completion]:
        return self.backend.generate(chats, self.sampling)


AGENT_MAX_TOKENS = 1024  # an agent turn's answer tokens when the role's sampling does not say


class LLMToolChat:
    """The agent role (RARG): a model that answers a chat with text and tool calls.

    A server whose tool parser could not read a call (vLLM's hermes parser on a call with broken JSON) returns it as
    plain ``content``: such calls are read from the text exactly as a local model's are (``split_tool_calls``) and
    counted as recovered, so both paths run the same calls."""

    def __init__(self, backend, sampling: SamplingParams | None = None):
        self.backend, self.sampling, self.name = (
            backend,
            sampling or SamplingParams(max_tokens=AGENT_MAX_TOKENS),
            backend.id,
        )

    def chat(self, requests: list[tuple[Chat, list[dict]]]) -> list[Completion]:
        return [_recover_tool_calls(c) for c in self.backend.chat_with_tools(requests, self.sampling)]


def _recover_tool_calls(completion: Completion) -> Completion:
    """The completion with the calls written in its text moved to ``extra["tool_calls"]``; a call that cannot be read
    (the agent is told why; nothing runs) is counted unreadable."""
    if not (completion.extra or {}).get("tool_calls"):
        text, calls = split_tool_calls(completion.text or "")
        if calls:
            completion.text = text
            completion.extra = {**(completion.extra or {}), "tool_calls": [c.as_dict() for c in calls]}
            completion.problems.append(TOOL_CALL_RECOVERED)
    if any(call.get("error") for call in completion.extra.get("tool_calls") or ()):
        completion.problems.append(UNREADABLE)
    return completion


# ---- building roles from a config ----------------------------------------------------------------------------
RERANKER_MODES = ("listwise", "pointwise")


@dataclass
class Roles:
    reranker: object | None = None
    scorers: dict[str, object] = field(default_factory=dict)  # by role name, e.g. "navigator"
    generator: object | None = None
    agent: object | None = None  # a tool-calling chat model (LLMToolChat)
    # QueryEncoder: the index's embedding model (the runner sets it), for methods that encode queries
    query_encoder: object | None = None

    def agent_model(self):
        if self.agent is None:
            raise GarenError("this method needs an 'agent' model (one that calls tools); add models.agent to "
                             "the config")
        return self.agent

    def encoder(self):
        if self.query_encoder is None:
            raise GarenError("this method encodes its query: run it through garen_infer.running.runner.execute, "
                             "which gives the roles the index's embedding model")
        return self.query_encoder

    def scorer(self, role: str):
        if role not in self.scorers:
            raise GarenError(f"this method needs a '{role}' model; add models.{role} to the config")
        return self.scorers[role]


def build_scorer(spec: dict, doc_texts: list[str], index: EmbeddedCorpus | None, backend_for,
                 role: str = "navigator"):
    """A yes/no scorer from a role spec. Every scorer role and the pointwise reranker build theirs here, so a
    scorer backend added here serves both."""
    kind = backend_of(spec)
    if kind == "embedding" and spec.get("model"):
        return EmbeddingYesNoScorer(own_embedder(spec["model"], index))
    if kind == "embedding":
        assert index is not None  # only an index stage's generator is built without the index
        return EmbeddingYesNoScorer(index.embedder, doc_texts, index.embeddings)
    if kind == "cross-encoder":
        return CrossEncoderScorer(backend_for(spec))
    return LLMYesNoScorer(backend_for(spec), **yes_no_prompting(spec, role))


YES_NO_PROMPTING = {"instruction": DEFAULT_INSTRUCTION, "assistant_prefix": QWEN3_ASSISTANT_PREFIX, "text": "paper"}


def yes_no_prompting(spec: dict, role: str) -> dict:
    """How a yes/no scorer prompts: the role spec's settings, else, for a model trained by ``garen-train``, the ones
    it was trained with (its export manifest), else the paper's. A spec that contradicts the training is refused:
    the model would be scored on a prompt it never saw."""
    trained = trained_scoring(spec)
    out = {}
    for name, default in YES_NO_PROMPTING.items():
        key = "prompt_text" if name == "text" else name  # the spec's field name
        if trained and key in spec and spec[key] != trained[1][key]:
            raise GarenError(f"models.{role}.{key}: {_short(spec[key])} is not what {trained[0]} was trained with "
                             f"({_short(trained[1][key])}); drop {key} from models.{role} to prompt it as trained")
        out[name] = spec.get(key, trained[1][key] if trained else default)
    return out


def _short(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:37] + "...")


def own_embedder(model: str, index: EmbeddedCorpus | None):
    """An embedding model of the role's own, not the index's (a bi-encoder ``garen-train export`` wrote, or any
    sentence-transformers model): it encodes the query and every text it scores, so the index's document vectors
    are not used. An export is encoded at the max length and with the query prompt it was trained with."""
    from garen_infer.llm.embeddings import Embedder, EmbeddingParams
    from garen_infer.shipped import missing_checkpoint_advice

    advice = missing_checkpoint_advice(model)
    if advice:
        raise GarenError(advice)
    if not Path(model).exists() and Path(model).parent.is_dir() and str(Path(model).parent) != ".":
        raise GarenError(f"no embedding model at {model}: {Path(model).parent} holds no such folder (train "
                         f"and export it first with garen-train fit and garen-train export)")
    manifest = read_manifest(model) or {}
    weights_tag(model)  # refuses an export whose weight files were replaced after it was written
    device = index.params("embeddings").device if index is not None and index.has("embeddings") else "cpu"
    defaults = EmbeddingParams()
    return Embedder(EmbeddingParams(model=model, device=device,
                                    max_seq_length=manifest.get("max_length", defaults.max_seq_length),
                                    query_prompt=manifest.get("query_prompt", defaults.query_prompt)))


def build_reranker(spec: dict, doc_texts: list[str], index: EmbeddedCorpus | None, backend_for,
                   dataset_name: str = ""):
    mode = spec.get("mode", "listwise")
    if mode == "pointwise":
        return PointwiseReranker(build_scorer(spec, doc_texts, index, backend_for, "reranker"), doc_texts)
    if mode != "listwise":
        raise GarenError(f"models.reranker.mode '{mode}' is not one of {', '.join(RERANKER_MODES)}")
    if spec.get("backend") == "cross-encoder":
        raise GarenError("models.reranker: a cross-encoder scores documents one by one; set "
                         "models.reranker.mode=pointwise")
    if backend_of(spec) == "embedding":
        if spec.get("model"):
            raise GarenError("models.reranker.model: a listwise embedding reranker reads the index's document vectors; "
                             "to rerank with another embedding model set models.reranker.mode=pointwise")
        assert index is not None  # only an index stage's generator is built without the index
        return EmbeddingReranker(index.embedder, index.embeddings)
    prompt, sampling = spec.get("prompt", "garen"), _sampling(spec)
    if sampling is not None and "max_tokens" not in spec["sampling"]:
        # the output budget follows from the prompt: the reasoning prompt writes a trace before its ranking
        sampling = replace(sampling, max_tokens=PROMPT_MAX_TOKENS.get(prompt, 200))
    return LLMListwiseReranker(backend_for(spec), doc_texts, prompt,
                               spec.get("max_words", PROMPT_MAX_WORDS.get(prompt, MAX_PASSAGE_WORDS)),
                               sampling, spec.get("prompt_text", "paper"), spec.get("task", bright_task(dataset_name)))


def _sampling(spec: dict) -> SamplingParams | None:
    return SamplingParams(**spec["sampling"]) if "sampling" in spec else None


def build_roles(models: dict, doc_texts: list[str], index: EmbeddedCorpus | None, cache, dataset_name: str = "",
                dataset: Dataset | None=None) -> Roles:
    """``models`` maps role names to specs, e.g. {"reranker": {"backend": "vllm", "model": ...}, "navigator": ...}.
    Role ``reranker`` is listwise (or ``mode: pointwise``), ``generator`` generates, every other role is a yes/no
    scorer. ``dataset_name`` tells a prompt that needs it which BRIGHT task it ranks for. ``dataset``: only the
    ``oracle`` backend reads it (a simulation from its judgments, llm/oracle.py)."""
    backends: dict[str, object] = {}

    def backend_for(spec: dict):
        backend_spec = {k: v for k, v in spec.items() if k not in ROLE_KEYS}
        key = json.dumps(backend_spec, sort_keys=True)
        if key not in backends:  # one engine per distinct model, shared by roles
            backends[key] = CachedBackend(make_backend(backend_spec), cache)
        return backends[key]


    roles = Roles()
    for role, spec in (models or {}).items():
        check_model_spec(spec, f"models.{role}")  # a typo'd key is refused, never left to its default
        spec = dict(spec or {})
        if "mode" in spec and role != "reranker":
            raise GarenError(f"models.{role}.mode: only the reranker has a mode (listwise or pointwise)")
        if spec.get("backend") == "oracle" and role == "generator":  # REPAIR's planner, SIMULATED from the judgments
            roles.generator = simulated_planner(spec, dataset)
            continue
        if spec.get("backend") == "oracle":
            correlated = spec.get("correlation") and index is not None and index.has("embeddings")
            vectors = index.embeddings if correlated and index is not None else None
            oracle = build_oracle(role, spec, dataset, doc_texts, vectors)
            if role == "reranker":
                roles.reranker = oracle
            else:
                roles.scorers[role] = oracle
            continue
        if role == "reranker":
            roles.reranker = build_reranker(spec, doc_texts, index, backend_for, dataset_name)
        elif role in ("generator", "agent"):
            if backend_of(spec) == "embedding":
                raise GarenError(f"models.{role} cannot be 'embedding': it must generate text (use "
                                 "transformers, vllm or openai)")
            if role == "generator":
                roles.generator = LLMGenerator(backend_for(spec), _sampling(spec))
            else:
                roles.agent = LLMToolChat(backend_for(spec), _sampling(spec))
        else:
            roles.scorers[role] = build_scorer(spec, doc_texts, index, backend_for, role)
    cache_vectors(roles, index, cache)
    return roles


def cache_vectors(roles: Roles, index, cache) -> None:
    """The query and text vectors of the index's embedding model, and of a role's own, go to the response cache."""
    from garen_infer.llm.vector_cache import attach

    if index is not None and cache is not None:
        index.cache_vectors_in(cache)

    for scorer in [*roles.scorers.values(), getattr(roles.reranker, "scorer", None)]:
        embedder = getattr(scorer, "embedder", None)
        if cache is not None and embedder is not None and embedder.vector_cache is None:
            attach(embedder, cache)
