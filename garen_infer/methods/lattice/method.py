"""LATTICE: LLM-guided hierarchical search over a semantic tree (Gupta et al., "LLM-guided Hierarchical Search
for End-to-end Reasoning Intensive Retrieval", arXiv 2510.13217, sec. 2.2, App. B.4 Algorithm 4; the reference
code's behaviour).

Per query:
    frontier = [root]
    for iteration = 1..num_iters:                       (20; the first expands the root alone)
        beam = the B best frontier nodes by path relevance          (B = 2; one global frontier)
        refs = reference leaves, drawn once for this iteration
        for node in beam: slate = node's children + references      (one call per slate)
        scores = the model's 0-100 relevance of each slate item
        for each answered slate: add it to the calibration data; reach the children with their scores
        (a slate whose answer does not parse leaves its node on the frontier)
        refit the calibration on every slate so far; update calibrated scores (and, in "paper" mode, paths)
        stop early when the frontier is empty or the document budget is spent
    return reached leaves by (1 - alpha) * path(parent) + alpha * calibrated(leaf)

Who scores a slate (``slate_scorer``): ``generator`` sends the paper's JSON slate prompt to the generator LLM (any
backend; the default of the GPU presets); any other name is a pointwise yes/no scorer role whose P(yes) per item,
x 100, is the score (the CPU default: the embedding model; a trained cross-encoder works the same way). Frontier
and budget are the same code for both. A pointwise scorer reads one item at a time, so its scores cannot depend
on the slate: the references and the calibration, which exist to undo slate-to-slate offsets of a model that
reads the slate together, are left out for it (they would add calls and change nothing they are meant to fix;
without shared references the per-slate biases would even absorb the differences between slates). Each item's
calibrated score is then its slate score. The embedding scorer judges an internal node by the normalised centroid
of its documents' embeddings, what lies beneath it, rather than by embedding its (extractive) description;
model scorers and the generator read the description.

Budget (fairness with other methods, GAREN App. B.2): with ``budget`` set, the search stops once that many distinct
documents were shown to the model; the last slates are cut to the documents left (in the node's child order),
and documents cut are never ranked. The ledger counts these documents, and every call and token.
"""

from __future__ import annotations

import zlib
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from garen_infer.index.first_stage import excluded_rows
from garen_infer.index.tree.semantic_tree import SemanticTree
from garen_infer.llm.problems import UNREADABLE
from garen_infer.llm.requests import Generate, ScoreYesNo
from garen_infer.llm.rgs_prompt import bright_task
from garen_infer.methods.base import Method, QueryState, Search
from garen_infer.methods.lattice.calibration import Calibration, CalibrationParams
from garen_infer.methods.lattice.search_tree import SearchTree
from garen_infer.methods.lattice.slates import Slate, parse_slate_scores, reference_leaves
from garen_infer.settings import Count, NonNegative, NonNegativeFloat, Positive, Probability

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.index.folder import IndexFolder


@dataclass
class LatticeConfig:
    num_iters: Count = 20  # search iterations, the first expands the root (App. B.1.2; reference num_iters)
    beam_size: Count = 2  # B, frontier nodes expanded per iteration (App. B.1.2; reference max_beam_size)
    alpha: Probability = 0.5  # path-relevance momentum (App. B.1.2; reference relevance_chain_factor)
    path_gate: Probability = 0.09  # scores at or below it are not smoothed along the path (reference chain_path_rel_fn)
    path_relevance: Literal["code", "paper"] = "code"  # "code": raw slate scores feed path relevance (released
    #   code); "paper": calibrated latent scores do (sec. 2.2)
    num_leaf_calib: NonNegative = 10  # reference leaves per leaf slate (App. B.1.2); 0 = no reference nodes at all;
    #   the generator's slates only (a pointwise scorer's scores cannot change with the slate)
    pl_tau: Positive = 5.0  # calibration temperature (reference pl_tau)
    lambda_mse: Probability = 1.0  # MSE weight; 1.0 = Plackett-Luce off (released run); 0.5 mixes both
    calib_lr: Positive = 1e-2  # AdamW (reference CalibModel)
    calib_weight_decay: NonNegativeFloat = 1e-4  # AdamW (reference CalibModel)
    calib_steps: NonNegative = 200  # full-batch steps per refit (reference; the paper says 100)
    calib_clip: Positive = 1.0  # gradient norm clip (reference CalibModel)
    slate_scorer: str = "generator"  # "generator": the JSON slate prompt; else a yes/no scorer role (P(yes) x 100)
    node_evidence: Literal["documents", "description"] = "documents"  # what the embedding scorer reads for an
    #   internal node: the normalised centroid of its documents' embeddings, or its description's embedding
    #   (model scorers and the generator always read the description)
    relevance: Literal["auto", "stackexchange", "leetcode", "theorem", "pony", "generic"] = "auto"  # the prompt's
    #   relevance definition (prompts.LATTICE_RELEVANCE); auto: by BRIGHT task, "generic" outside BRIGHT
    max_desc_words: NonNegative = 0  # words of each candidate in the prompt; 0 = full text (reference default)
    budget: Count | None = None  # distinct documents shown before the search stops (GAREN App. B.2: 100);
    #   None = stop after num_iters only
    give_up_after: Count = 2  # failed answers before a node leaves the frontier (reference: never; with greedy
    #   decoding and the response cache a retry repeats the same answer)
    seed: int = 42  # reference-leaf draws and the GMM (reference: numpy's global seed 42)
    tree: str = "semantic_tree"  # the index stage holding the tree


class Lattice(Method):
    name, Config, roles = "lattice", LatticeConfig, ("generator",)
    index_stages = ("semantic_tree",)

    def __init__(self, config: LatticeConfig, index: IndexFolder, dataset: Dataset):
        super().__init__(config, index, dataset)
        from garen_infer.llm.prompts import BRIGHT_RELEVANCE, LATTICE_RELEVANCE

        relevance: str = config.relevance
        if relevance == "auto":
            task = bright_task(dataset.name if dataset is not None else "")
            relevance = BRIGHT_RELEVANCE.get(task, "stackexchange") if task else "generic"
        self.relevance = LATTICE_RELEVANCE[relevance]
        self.listwise = config.slate_scorer == "generator"  # one call reads the whole slate: scores are relative
        index.require(config.tree, f"method '{self.name}'")
        self.tree = SemanticTree.load(index.path / config.tree, index.row_of_id)
        self.doc_texts = [d.full_text for d in dataset.documents]
        self.doc_row = dataset.doc_index
        self.calibration = CalibrationParams(config.pl_tau, config.lambda_mse, config.calib_lr,
                                             config.calib_weight_decay,
                                             config.calib_steps, config.calib_clip)

    @classmethod
    def stages_for(cls, config: LatticeConfig) -> tuple[str, ...]:
        return (config.tree,)

    @classmethod
    def roles_for(cls, config: LatticeConfig) -> tuple[str, ...]:
        return (config.slate_scorer,)

    # ---- the search ---------------------------------------------------------------------------------------------
    def search(self, state: QueryState) -> Search:
        scored = yield from self.traverse(state)
        return [row for row, _ in scored]

    def traverse(self, state: QueryState) -> Generator[Any, Any, list[tuple[int, float]]]:
        """The search of the module docstring; returns (corpus row, final score) best first."""
        c = self.config
        budget = state.budget if state.budget is not None else c.budget
        excluded = excluded_rows(state.query, self.doc_row)
        tree = SearchTree(self.tree, excluded, c.alpha, c.path_gate, c.path_relevance)
        calibration = Calibration(self.calibration)
        rng = np.random.default_rng([c.seed, zlib.crc32(state.query.id.encode())])
        shown: set[int] = set()  # documents the model has seen: the budget spent
        stats: dict[str, Any] = {"iterations": 0, "slates": 0, "failed_slates": 0, "stop": "iterations"}
        beams: list[list[int]] = []  # the nodes expanded in each iteration (tree node ids), for the trace
        for _ in range(c.num_iters):
            beam = tree.frontier(c.give_up_after)[: c.beam_size]
            if not beam:
                stats["stop"] = "frontier"
                break
            references = self.reference_leaves(tree, rng)
            slates = [s for s in (self.slate(tree, node, references, shown, budget) for node in beam) if s.children]
            if not slates:
                stats["stop"] = "budget"
                break
            beams.append([s.node for s in slates])
            answers = yield self.request(state.query.text, slates)
            for slate, scores in zip(slates, self.read(answers, slates)):
                if scores is None:
                    tree.failures[slate.node] += 1
                    stats["failed_slates"] += 1
                    if self.listwise:  # a yes/no scorer counts its own answers
                        state.answer_problems.append(("generator", UNREADABLE))
                    continue
                calibration.add({slate.items[i]: s for i, s in scores.items()})
                tree.expand(slate.node, {child: scores.get(i, 0.0) for i, child in enumerate(slate.children)})
            if self.listwise:
                tree.calibrate(calibration.fit().latent)
            stats["iterations"] += 1
            stats["slates"] += len(slates)
            if budget is not None and len(shown) >= budget:
                stats["stop"] = "budget"
                break
        scored = [(int(self.tree.row[leaf]), score) for leaf, score in tree.leaf_scores()]
        state.trace.update(stats, documents_shown=len(shown), leaves_ranked=len(scored),
                           deepest=int(self.tree.depth[tree.expanded].max()) if tree.expanded.any() else 0, beams=beams)
        return scored

    def reference_leaves(self, tree: SearchTree, rng: np.random.Generator) -> list[int]:
        if not (self.listwise and self.config.num_leaf_calib):
            return []
        return reference_leaves(tree.reached_leaves(), tree.calibrated, self.config.num_leaf_calib, rng,
                                self.config.seed)

    def slate(self, tree: SearchTree, node: int, leaf_refs: list[int], shown: set[int], budget: int | None) -> Slate:
        """The node's unmasked children (documents beyond the budget cut), then its references. The documents it
        shows for the first time are added to ``shown``: the model sees them whether or not its answer parses."""
        children = []
        new_documents = []
        for child in self.tree.children[node]:
            if tree.masked[child]:
                continue
            row = int(self.tree.row[child])
            if row >= 0 and row not in shown:
                if budget is not None and len(shown) >= budget:
                    continue
                shown.add(row)
                new_documents.append(row)
            children.append(child)
        leaf = all(self.tree.is_leaf(c) for c in self.tree.children[node])
        references: list[int] = []
        if self.listwise and self.config.num_leaf_calib:
            if leaf:
                references = list(leaf_refs)
            elif self.tree.depth[node] > 0:
                best = tree.best_at_depth(int(self.tree.depth[node]))
                references = [best] if best is not None else []
        return Slate(node, children, references, leaf, new_documents)

    # ---- asking the model and reading its answer ---------------------------------------------------------------
    def text(self, node: int) -> str:
        row = int(self.tree.row[node])
        return self.doc_texts[row] if row >= 0 else self.tree.desc[node]

    def request(self, query: str, slates: list[Slate]):
        documents = tuple(r for s in slates for r in s.new_documents)
        if self.listwise:
            from garen_infer.llm.prompts import lattice_slate

            chats = tuple(lattice_slate(query, [self.text(n) for n in s.items], self.relevance, s.leaf,
                                        self.config.max_desc_words) for s in slates)
            return Generate(chats, documents=documents)
        items = [n for s in slates for n in s.items]
        # rows: what each item stands for, read by a backend that judges by identity (the simulated oracle) and,
        # by_documents, by the embedding scorer, which scores an internal node by its documents' centroid
        return ScoreYesNo(tuple(self.text(n) for n in items), role=self.config.slate_scorer, documents=documents,
                          rows=tuple(self.tree.rows_under(n) for n in items),
                          by_documents=self.config.node_evidence == "documents")

    def read(self, answers: list, slates: list[Slate]) -> list[dict[int, float] | None]:
        """Per slate: item position -> score in [0, 1], or None if the answer is unusable."""
        if self.listwise:
            return [parse_slate_scores(text, len(s.items)) for text, s in zip(answers, slates)]
        out, start = [], 0
        for s in slates:
            probabilities = answers[start : start + len(s.items)]
            start += len(s.items)
            out.append({i: min(1.0, max(0.0, float(p))) for i, p in enumerate(probabilities) if p is not None} or None)
        return out

    @staticmethod
    def summarize(records: list[dict]) -> dict:
        traces = [r["trace"] for r in records if "iterations" in r.get("trace", {})]
        if not traces:
            return {}
        n = len(traces)
        out = {f"mean_{key}": round(sum(t[key] for t in traces) / n, 4)
               for key in ("iterations", "slates", "failed_slates", "documents_shown", "leaves_ranked", "deepest")}
        out["stops"] = {stop: sum(t["stop"] == stop for t in traces) for stop in sorted({t["stop"] for t in traces})}
        return out


METHOD = Lattice
