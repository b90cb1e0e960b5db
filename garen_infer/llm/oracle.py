"""SIMULATION, not a model: a reranker and yes/no scorers of known quality, made from the relevance judgments.

On a CPU no LLM strong enough to play GAREN's reranker runs at benchmark scale, yet the question that matters is
how a search method behaves as its reranker gets better. Retrieval papers answer it with simulated rerankers of
controlled quality; the ``oracle`` backend is that tool for the reranker and scorer roles. Its numbers are NOT
model results: every run made with it says so (config.json, metrics.json, the run file's tag, the CLI banner).

The rule, one for both roles. An item standing for documents D (one document for the reranker; a group's
members, or one document, for a yes/no scorer such as GAREN's navigator) has the noisy relevance

    s(q, D) = max_{d in D} gain(q, d) + sigma * z,        z ~ N(0, 1) drawn from a hash of (seed, role, q, D)

gain = the judgment grade (unjudged and negative grades count 0; ``gain: binary`` makes every grade > 0 a 1).
z depends only on (seed, role, query id, the documents' ids): never on the batch, the order of requests or the
method asking, so every method faces the same noisy reranker. The role is in the hash so the reranker and the
navigator err independently, as two models would.
- reranker (listwise): orders a window by s, best first. At sigma = 0 equal grades fall in the order of their
  draws z, so sigma = 0 is the limit of small noise (keeping the window's order instead would hand the first
  stage's order among non-relevant documents to methods that expand from the top of the list).
- reranker with ``mode: pointwise``: the scorer below scores each document and llm/pointwise.py sorts a window
  by it; the draws are the reranker's, so for sigma > 0 it orders a window exactly as the listwise oracle does
  (at sigma = 0 the pointwise reranker keeps the window's order among equal grades, as it does for any scorer).
- scorer (yes/no): P(yes) = logistic(YES_SLOPE * (s - 1/2)), one draw per item: a navigator reading a group's
  summary sees the group's best evidence, blurred once.
Quality: documents whose gains differ by delta come out in the right order with probability
Phi(delta / (sigma * sqrt 2)) (the difference of two independent N(0, sigma^2) draws is N(0, 2 sigma^2)). For
binary judgments: sigma 0.25 -> 0.998, 0.5 -> 0.921, 1 -> 0.760, 2 -> 0.638. ``pairwise_accuracy`` measures it.

Correlated noise (``correlation: rho`` > 0). A real reranker's errors are not independent across documents: it
over- or under-rates whole regions of embedding space at once, so a method that expands the neighbours of a
document it was wrongly shown meets neighbours wrongly rated the same way. With rho > 0 the draw is

    z(q, D) = sqrt(1 - rho) * e(q, D) + sqrt(rho) * g_q . u_D

e is the draw above, g_q ~ N(0, I) a random direction per (seed, role, query), and u_D the unit vector of D's
mean-centred, normalised index embeddings (a group: of their mean). z stays N(0, 1), and two items share noise
in proportion to their similarity: corr(z_a, z_b) = rho * cos(u_a, u_b) (0 for unrelated documents, since the
vectors are centred). A pair a grade apart with noise correlation c is ordered right with probability
Phi(1 / (sigma * sqrt(2 (1 - c)))): near neighbours are confused less with each other but move together, and
strangers (negative c, the vectors being centred) a little more, so at one sigma the accuracy depends on the pool.
Sweeps therefore report the *measured* pairwise accuracy next to sigma and compare noise models at equal accuracy.

The judgments reach this module only: methods get a dataset without them (runner.py), and requests carry ids
and corpus rows, never grades.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Literal

import numpy as np

from garen_infer.errors import GarenError
from garen_infer.llm.pointwise import PointwiseReranker
from garen_infer.llm.types import Completion
from garen_infer.settings import NonNegativeFloat, Probability, build

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset


BACKEND = "oracle"
YES_SLOPE = 4.0  # only the order of P(yes) matters to a navigator; 4 maps gain 1 / 0 to P(yes) 0.88 / 0.12
RUN_TAG = "SIMULATED-oracle"  # appended to the run file's tag: a simulated run.trec says so on every line
NOTICE = ("SIMULATION: the oracle backend plays these roles from the dataset's relevance judgments plus seeded "
          "Gaussian noise (garen_infer/llm/oracle.py); the numbers measure the search method under a reranker of "
          "known quality, they are NOT results of any model")


@dataclass(frozen=True)
class OracleSpec:
    sigma: NonNegativeFloat = 0.5  # noise standard deviation, in grades: 0 = a perfect judge
    seed: int = 0
    gain: Literal["graded", "binary"] = "graded"  # binary: every grade > 0 counts 1
    correlation: Probability = 0.0  # rho: the share of the noise that documents close in embedding space share

    @classmethod
    def from_models(cls, role: str, spec: dict) -> OracleSpec:
        options = {k: v for k, v in spec.items() if k not in ("backend", "mode")}  # build_oracle checks the mode
        return build(cls, options, f"models.{role}")


def standard_normal(*parts) -> float:
    """A N(0, 1) draw fixed by ``parts``: the same parts give the same number on any machine, in any order."""
    digest = hashlib.blake2b(json.dumps(parts, ensure_ascii=False).encode("utf-8"), digest_size=8).digest()
    return NormalDist().inv_cdf((int.from_bytes(digest, "big") + 0.5) / 2.0**64)


def centred_directions(vectors: np.ndarray) -> np.ndarray:
    """u_d of the module docstring: each vector minus the corpus mean, at unit length (a zero vector stays zero)."""
    centred = np.asarray(vectors, dtype=np.float64)
    centred = centred - centred.mean(axis=0)
    norms = np.linalg.norm(centred, axis=1, keepdims=True)
    return np.divide(centred, norms, out=np.zeros_like(centred), where=norms > 0)


class NoisyJudge:
    """s(q, D) of the module docstring, for one role. ``vectors``: the index's document embeddings (row order),
    needed for correlated noise only."""

    def __init__(self, qrels: dict[str, dict[str, int]], doc_ids: list[str], spec: OracleSpec, role: str,
                 vectors: np.ndarray | None = None):
        self.qrels, self.doc_ids, self.spec, self.role = qrels, doc_ids, spec, role
        correlated = f",correlation={spec.correlation}" if spec.correlation else ""
        self.name = f"oracle(sigma={spec.sigma},seed={spec.seed},gain={spec.gain}{correlated})"
        if spec.correlation and vectors is None:
            raise GarenError(f"the oracle's correlated noise (correlation {spec.correlation}) needs the "
                             "index's embeddings, and none were given")
        self.directions = centred_directions(vectors) if spec.correlation and vectors is not None else None
        self._fields: dict[str, np.ndarray] = {}  # g_q per query

    def gain(self, query_id: str, row: int) -> float:
        grade = self.qrels.get(query_id, {}).get(self.doc_ids[row], 0)
        if grade <= 0:
            return 0.0
        return 1.0 if self.spec.gain == "binary" else float(grade)

    def draw(self, query_id: str, rows) -> float:
        members = sorted(self.doc_ids[r] for r in rows)  # a group is the same item whatever its member order
        own = standard_normal(self.spec.seed, self.role, query_id, members)
        rho = self.spec.correlation
        return own if not rho else math.sqrt(1 - rho) * own + math.sqrt(rho) * self.shared(query_id, rows)

    def shared(self, query_id: str, rows) -> float:
        """g_q . u_D: the part of the noise an item shares with its neighbours in embedding space."""
        assert self.directions is not None  # drawn only for correlated noise, which sets them
        if query_id not in self._fields:
            digest = hashlib.blake2b(json.dumps([self.spec.seed, self.role, query_id, "field"]).encode(),
                                     digest_size=8).digest()
            rng = np.random.default_rng(int.from_bytes(digest, "big"))
            self._fields[query_id] = rng.standard_normal(int(self.directions.shape[1]))
        direction = self.directions[rows[0]] if len(rows) == 1 else self.directions[list(rows)].mean(axis=0)
        norm = float(np.linalg.norm(direction))
        return float(direction @ self._fields[query_id]) / norm if norm > 0 else 0.0

    def score(self, query_id: str, rows) -> float:
        return max(self.gain(query_id, r) for r in rows) + self.spec.sigma * self.draw(query_id, rows)


def _identity(job, needs_rows: bool) -> None:
    if not job.query_id:
        raise GarenError("the oracle backend needs each request's query id, and this one came without it")
    if needs_rows and not job.rows:
        raise GarenError("the oracle scorer needs the corpus rows each text stands for (ScoreYesNo.rows); "
                         "this method's request has none")


class OracleReranker:
    """Listwise: orders each window by the noisy relevance s(q, d)."""

    def __init__(self, judge: NoisyJudge):
        self.judge, self.name = judge, judge.name

    def rerank(self, jobs) -> list[tuple[list[int], Completion]]:
        out = []
        for job in jobs:
            _identity(job, needs_rows=False)
            start = time.perf_counter()
            keys = [(self.judge.score(job.query_id, (r,)), self.judge.draw(job.query_id, (r,))) for r in job.rows]
            order = sorted(range(len(job.rows)), key=lambda i: keys[i], reverse=True)  # sigma = 0: ties by the draw
            completion = Completion(text=" > ".join(f"[{i + 1}]" for i in order), seconds=time.perf_counter() - start)
            out.append(([job.rows[i] for i in order], completion))
        return out


class OracleYesNoScorer:
    """Yes/no: P(yes) from the noisy relevance of the documents the text stands for (a group: its best gain)."""

    def __init__(self, judge: NoisyJudge):
        self.judge, self.name = judge, judge.name

    def score(self, jobs) -> list[Completion]:
        out = []
        for job in jobs:
            _identity(job, needs_rows=True)
            start = time.perf_counter()
            s = self.judge.score(job.query_id, job.rows)
            out.append(Completion(score=1.0 / (1.0 + math.exp(-YES_SLOPE * (s - 0.5))),
                                  seconds=time.perf_counter() - start))
        return out


def build_oracle(role: str, spec: dict, dataset: Dataset | None, doc_texts: Sequence[str] = (),
                 vectors: np.ndarray | None = None):
    """The oracle for ``role`` (``reranker``, listwise or ``mode: pointwise``, or a scorer role) from its
    models.<role> spec and the dataset whose judgments it reads (and, for correlated noise, the index's document
    embeddings). Refuses a dataset without judgments and the roles that write text."""
    if role in ("generator", "agent"):
        raise GarenError(f"models.{role} cannot be 'oracle': the oracle judges relevance, it does not write text")
    if dataset is None or not dataset.qrels:
        name = getattr(dataset, "name", "?")
        raise GarenError(f"models.{role}: the oracle backend simulates a model from relevance judgments, and "
                         f"dataset '{name}' has none")
    oracle_spec = OracleSpec.from_models(role, spec)
    if oracle_spec.correlation and vectors is None:
        raise GarenError(f"models.{role}.correlation: correlated noise follows the index's embeddings, and "
                         "this run has no embeddings stage")
    judge = NoisyJudge(dataset.qrels, dataset.doc_ids, oracle_spec, role, vectors)
    if role != "reranker":
        return OracleYesNoScorer(judge)
    mode = spec.get("mode", "listwise")
    if mode not in ("listwise", "pointwise"):
        raise GarenError(f"models.reranker.mode '{mode}' is not one of listwise, pointwise")
    if mode == "pointwise":
        return PointwiseReranker(OracleYesNoScorer(judge), list(doc_texts))
    return OracleReranker(judge)


def _oracle_of(played):
    """The oracle behind a role object (a pointwise reranker's scorer included), or None."""
    played = getattr(played, "scorer", played)
    return played if isinstance(played, (OracleReranker, OracleYesNoScorer)) else None


# ---- labelling: a simulated run must never pass for model results ---------------------------------------------
def _recorded(spec: OracleSpec) -> dict:
    """The spec as a run records it; uniform noise (correlation 0) is recorded without ``correlation``, the
    field that only correlated noise needs."""
    fields = asdict(spec)
    if not fields["correlation"]:
        del fields["correlation"]
    return fields


def simulated_roles(models: dict, roles=None) -> dict[str, dict]:
    """Role -> oracle spec, for every role the config (or the roles actually passed in) plays with the oracle."""
    found = {role: {**_recorded(OracleSpec.from_models(role, spec)),
                    **({"mode": spec["mode"]} if "mode" in spec else {})}
             for role, spec in (models or {}).items() if (spec or {}).get("backend") == BACKEND}
    if roles is not None:
        played = {"reranker": roles.reranker, **roles.scorers}
        for role, obj in played.items():
            if _oracle_of(obj) is not None:
                pointwise = {"mode": "pointwise"} if _oracle_of(obj) is not obj else {}
                found[role] = {**_recorded(_oracle_of(obj).judge.spec), **pointwise}
    return dict(sorted(found.items()))


def simulation_label(models: dict, roles=None) -> dict | None:
    """What config.json and metrics.json record under "simulation" (None for a run without the oracle)."""
    found = simulated_roles(models, roles)
    return {"notice": NOTICE, "roles": found} if found else None


def banner(label: dict) -> str:
    roles = ", ".join(
        f"{role} sigma={spec['sigma']} seed={spec['seed']} gain={spec['gain']}"
        + (f" correlation={spec['correlation']}" if spec.get("correlation") else "")
        for role, spec in label["roles"].items()
    )
    rule = "*" * 100
    return f"{rule}\n*** SIMULATED RUN ({roles})\n*** {label['notice']}\n{rule}"


def is_simulated_run(path) -> bool:
    """Whether a TREC run file was written by a simulated run (its tag says so)."""
    with open(path, encoding="utf-8") as handle:
        first = handle.readline().split()
    return len(first) == 6 and first[5].endswith(RUN_TAG)


# ---- quality: how often the noisy scores order two documents of different gain correctly ---------------------
def expected_pairwise_accuracy(sigma: float, delta: float = 1.0, noise_correlation: float = 0.0) -> float:
    """Phi(delta / (sigma sqrt(2 (1 - c)))): the chance the rule orders two documents whose gains differ by delta
    and whose draws have correlation c (0 without correlated noise; rho * cos(u_a, u_b) with it)."""
    spread = sigma * math.sqrt(2.0 * (1.0 - noise_correlation))
    return 1.0 if spread == 0 else NormalDist().cdf(delta / spread)


def ordered_pairs(scores, gains) -> tuple[float, int]:
    """Over every pair of items with different gains: how many the scores order like the gains (a score tie
    counts one half), and how many such pairs there are."""
    scores, gains = np.asarray(scores, dtype=float), np.asarray(gains, dtype=float)
    correct, total = 0.0, 0
    levels = np.unique(gains)
    for i, low in enumerate(levels):
        below = np.sort(scores[gains == low])
        for high in levels[i + 1 :]:
            above = scores[gains == high]
            less = np.searchsorted(below, above, side="left")
            ties = np.searchsorted(below, above, side="right") - less
            correct += float(less.sum() + 0.5 * ties.sum())
            total += len(above) * len(below)
    return correct, total


def pairwise_accuracy(judge: NoisyJudge, pools: dict[str, list[int]]) -> float:
    """The reranker's measured pairwise accuracy over each query's pool of corpus rows (pairs pooled over queries)."""
    correct, total = 0.0, 0
    for query_id, rows in pools.items():
        c, n = ordered_pairs([judge.score(query_id, (r,)) for r in rows], [judge.gain(query_id, r) for r in rows])
        correct, total = correct + c, total + n
    return correct / total if total else float("nan")
