"""GAREN's groups and their summaries, as index stages.

Stages: ``groups`` (Leiden by default), and the App. C.2 controls ``groups_kmeans`` and ``groups_random`` with
the same number of groups. Each writes a folder in the groups format (``groups_format.py``: ``doc_groups.npy``,
``groups.jsonl``, ``stats.json``). ``groups_soft`` (overlapping groups) is learned by ``garen-train`` and
written by ``garen-train export``, which summarises its groups with ``summarize_groups`` below.
Summarising submits every group's prompt as one stream (all at once to a server, in batches to a local engine;
``json_generation.stream_json``), takes the answers as they come, caches each as it arrives and shows a progress
bar; it is resumable: each finished summary is appended to ``.<stage>.<partition digest>.partial.jsonl`` at once
and skipped when the build runs again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from tqdm.auto import tqdm

from garen_infer.errors import GarenError
from garen_infer.index.grouping.groups_format import Groups, write_groups  # noqa: F401 - Groups is read from here too
from garen_infer.index.grouping.partition import kmeans_groups, leiden_groups, random_groups
from garen_infer.index.grouping.summaries import ExtractiveSummarizer, fit_documents, parse_summary
from garen_infer.index.stages import Stage, register
from garen_infer.llm.json_generation import release_stage_generator, stage_generator, stream_json
from garen_infer.llm.model_specs import SUMMARIZER_SPEC
from garen_infer.settings import Count, NonNegative, Positive, Probability, execution_only
from garen_infer.storage.append_log import read_finished
from garen_infer.storage.faults import fault_point

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.index.open_index import OpenIndex


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupParams:
    construction: Literal["leiden", "kmeans", "random"] = "leiden"  # App. C.2
    # graspologic (resolution + randomness) | leidenalg (resolution only)
    leiden_backend: Literal["graspologic", "leidenalg"] = "graspologic"
    resolution: Positive = 1.0  # gamma, App. A
    randomness: Positive = 0.001  # theta, App. A
    max_group_size: Count = 20  # s-bar, App. A: groups this large are re-partitioned
    # ">= s-bar" (graspologic's max_cluster_size; App. F's max of 19) | "exceeding" (> s-bar, App. A's words)
    cap_rule: Literal["graspologic", "exceeding"] = "graspologic"
    seed: int = 42
    # or a generator model spec
    summarizer: dict = field(default_factory=lambda: {"backend": "extractive"}, metadata=SUMMARIZER_SPEC)
    # What the LLM summarizer reads (App. G: "The following {n} documents ...": every document of the group). By
    # default all documents, whole, while the group fits ``summary_budget_words``; past it every document is cut to
    # an equal share, short ones kept whole (summaries.fit_documents). 16,000 words is about 21-24k Qwen tokens of
    # English: with the App. G template and a 4,096-token answer it fits garen-paper's 32,768-token context.
    summary_max_docs: Count | None = None  # documents shown per group (None: all n)
    summary_max_words: Count | None = None  # words per document (None: whole)
    summary_budget_words: Count | None = 16_000  # words of documents per prompt in all (None: no limit)
    summary_retries: NonNegative = 2  # sampled retries after malformed JSON, then the extractive fallback
    batch_size: Count = execution_only(32)  # groups per call to a local generator; a server is given them all at once


def _partition(folder: OpenIndex, dataset: Dataset, params: GroupParams) -> list[list[int]]:
    graph = folder.knn_graph
    if params.construction == "leiden":
        return leiden_groups(graph.neighbours, graph.weights, max_group_size=params.max_group_size,
                             resolution=params.resolution,
                             randomness=params.randomness, backend=params.leiden_backend, seed=params.seed,
                             cap_rule=params.cap_rule)
    n_groups = folder.manifest["stages"]["groups"]["info"]["groups"]  # same number as the Leiden groups
    if params.construction == "kmeans":
        return kmeans_groups(np.asarray(folder.embeddings), n_groups, params.seed)
    if params.construction == "random":
        return random_groups(len(dataset.documents), n_groups, params.seed)
    raise GarenError(f"unknown group construction '{params.construction}' (leiden, kmeans or random)")


def _summarize(folder: OpenIndex, dataset: Dataset, params: GroupParams, groups: list[list[int]],
               partial: Path, stage_name: str) -> tuple[list[dict], dict]:
    texts = [d.full_text for d in dataset.documents]
    extractive = ExtractiveSummarizer(texts, folder.embeddings)
    done: dict[int, dict] = read_finished(partial, "group")
    generator = stage_generator(params.summarizer, folder, texts)
    todo = [g for g in range(len(groups)) if g not in done]
    fallbacks = 0
    answers = (
        _llm_summaries(generator, todo, groups, texts, params)
        if generator is not None
        else ((g, None) for g in todo)
    )
    with open(partial, "a", encoding="utf-8") as out, tqdm(total=len(groups), initial=len(done),
                                                           desc="group summaries", unit="group") as bar:
        for g, result in answers:  # in the order they are answered
            source = generator.name if generator else "extractive"
            if result is None:
                if generator is not None:
                    fallbacks += 1
                    log.warning("group %d: no valid JSON summary after %d retries; using the extractive "
                                "summary", g, params.summary_retries)
                result, source = extractive.summarize(groups[g]), "extractive"
            record = {"group": g, **result, "summarizer": source}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            out.flush()  # kept if the build stops here; a rerun asks only for the groups not written
            done[g] = record
            fault_point("groups:summary-batch")
            bar.update(1)
    info = {"summarizer": params.summarizer.get("model", "extractive"), "summary_fallbacks": fallbacks,
            **release_stage_generator(generator, stage_name)}
    return [done[g] for g in range(len(groups))], info


def _llm_summaries(generator, todo: list[int], groups, texts,
                   params: GroupParams) -> Iterator[tuple[int, object]]:
    """(group, its summary or None) for the groups of ``todo``, all submitted at once, each as it is answered."""
    from garen_infer.llm.prompts import summarizer as summarizer_prompt

    text = params.summarizer.get("prompt_text", "paper")

    def chat(k: int):
        rows = groups[todo[k]]
        return summarizer_prompt(fit_documents([texts[r] for r in rows], params.summary_max_docs,
                                               params.summary_max_words,
                                               params.summary_budget_words), max_words=None, text=text)

    for k, answer in stream_json(generator, len(todo), chat, lambda _, answer: parse_summary(answer),
                                 params.summary_retries,
                                 params.batch_size):
        yield todo[k], answer


def summarize_groups(folder: OpenIndex, dataset: Dataset, params: GroupParams, stage_name: str,
                     groups: list[list[int]]) -> tuple[list[dict], dict]:
    """Summaries of ``groups`` (rows per group) for stage ``stage_name``, resuming an interrupted run of the
    same partition; returns one record per group and the manifest facts about the summarizer."""
    # the partial file is named after the partition, so summaries of another partition are never reused
    digest = hashlib.sha256(json.dumps(groups).encode()).hexdigest()[:12]
    partial = folder.path / f".{stage_name}.{digest}.partial.jsonl"
    for stale in folder.path.glob(f".{stage_name}.*.partial.jsonl"):
        if stale != partial:
            stale.unlink()
    return _summarize(folder, dataset, params, groups, partial, stage_name)


def finish_summaries(folder, stage_name: str) -> None:
    """Drop the stage's partial summary file once the stage folder is written."""
    for partial in folder.path.glob(f".{stage_name}.*.partial.jsonl"):
        partial.unlink()


def _build(stage_name: str):
    def build(folder: OpenIndex, dataset: Dataset, params: GroupParams) -> dict:
        if stage_name != "groups":
            params = replace(params, construction=stage_name.removeprefix("groups_"))
        start = time.perf_counter()
        groups = _partition(folder, dataset, params)
        partition_seconds = time.perf_counter() - start
        records, info = summarize_groups(folder, dataset, params, stage_name, groups)
        stats = write_groups(folder.path / stage_name, dataset.doc_ids, groups, records)
        finish_summaries(folder, stage_name)
        return {**stats, **info, "partition_seconds": round(partition_seconds, 2),
                "seconds": round(time.perf_counter() - start, 2)}

    return build


@dataclass(frozen=True)
class SoftGroupParams:
    """Overlapping groups learned by ``garen-train`` (configs/train/partition-*.yaml) and written by
    ``garen-train export``: the manifest records where they came from and how memberships became groups."""

    checkpoint: str = ""  # the .ckpt they were exported from
    checkpoint_sha256: str = ""
    threshold: Probability = 0.0  # a document joins a further group when its membership reaches this
    max_groups_per_doc: Count = 1  # and joins at most this many groups
    summarizer: dict = field(default_factory=lambda: {"backend": "extractive"}, metadata=SUMMARIZER_SPEC)


def _learned_elsewhere(folder: OpenIndex, dataset: Dataset, params) -> dict:
    raise GarenError("index stage 'groups_soft' is learned, not built: train it with 'garen-train fit --config "
                     "configs/train/partition-dmon.yaml' and write it with 'garen-train export --checkpoint "
                     "CKPT --index DIR'")


register(Stage("groups", GroupParams, _build("groups"), requires=("embeddings", "knn_graph")))
register(Stage("groups_kmeans", GroupParams, _build("groups_kmeans"), requires=("groups",)))
register(Stage("groups_random", GroupParams, _build("groups_random"), requires=("groups",)))
register(Stage("groups_soft", SoftGroupParams, _learned_elsewhere, requires=("embeddings", "knn_graph", "groups")))
