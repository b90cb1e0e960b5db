"""GAREN's groups and their summaries, as index stages.

Stages: ``groups`` (Leiden by default), and the App. C.2 controls ``groups_kmeans`` and ``groups_random`` with
the same number of groups. Each writes a folder in the groups format (``groups_format.py``: ``doc_groups.npy``,
``groups.jsonl``, ``stats.json``). ``groups_soft`` (overlapping groups) is learned by ``garen-train`` and
written by ``garen-train export``, which summarises its groups with ``summarize_groups`` below.
Summarising submits every group's prompt as one stream (all at once to a server, in batches to a local engine;
``json_generation.stream_json``), takes the answers as they come, caches each as it arrives and shows a progress
bar; it is resumable: each finished summary is appended to ``.<stage>.<partition digest>.partial.jsonl`` at once
and skipped when the build runs again. The summaries shard over processes and hosts (``index --shard
I/N``, then ``index --merge-shards``: ``summary_shards.py``), each group's prompt depending on its partition
alone.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

import numpy as np
from tqdm.auto import tqdm

from garen_infer.errors import GarenError
from garen_infer.index.grouping import summary_shards as shards
from garen_infer.index.grouping.groups_format import Groups, write_groups  # noqa: F401 - Groups is read from here too
from garen_infer.index.grouping.partition import kmeans_groups, leiden_groups, random_groups
from garen_infer.index.grouping.summaries import ExtractiveSummarizer, fit_documents, parse_summary
from garen_infer.index.stages import Stage, calls_generator, register
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


def summarize_into(folder: OpenIndex, dataset: Dataset, params: GroupParams, groups: list[list[int]],
                   partial: Path, stage_name: str, mine: list[int] | None = None) -> tuple[list[dict], dict]:
    """The summaries of groups ``mine`` (default: all), in that order, each appended to ``partial`` as it is
    answered; those ``partial`` holds already are kept and not asked again. Returns them and the manifest
    facts."""
    mine = list(range(len(groups))) if mine is None else mine
    texts = [d.full_text for d in dataset.documents]
    extractive = ExtractiveSummarizer(texts, folder.embeddings)
    done: dict[int, dict] = read_finished(partial, "group")
    todo = [g for g in mine if g not in done]
    generator = stage_generator(params.summarizer, folder, texts) if todo else None
    answers = (
        _llm_summaries(generator, todo, groups, texts, params)
        if generator is not None
        else ((g, None) for g in todo)
    )
    bar = tqdm(total=len(mine), initial=len(mine) - len(todo), desc="group summaries", unit="group")
    with open(partial, "a", encoding="utf-8") as out, bar:
        for g, result in answers:  # in the order they are answered
            source = generator.name if generator else "extractive"
            if result is None:
                if generator is not None:
                    log.warning("group %d: no valid JSON summary after %d retries; using the extractive "
                                "summary", g, params.summary_retries)
                result, source = extractive.summarize(groups[g]), "extractive"
            record = {"group": g, **result, "summarizer": source}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            out.flush()  # kept if the build stops here; a rerun asks only for the groups not written
            done[g] = record
            fault_point("groups:summary-batch")
            bar.update(1)
    records = [done[g] for g in mine]
    # counted from the records, so summaries kept from an interrupted build count as well
    fallbacks = sum(r["summarizer"] == "extractive" for r in records) if calls_generator(params) else 0
    info = {"summarizer": params.summarizer.get("model", "extractive"), "summary_fallbacks": fallbacks,
            **(release_stage_generator(generator, stage_name) if generator is not None else
               {"truncated_prompts": 0, "answer_problems": {}} if calls_generator(params) else {})}
    return records, info


def _llm_summaries(generator, todo: list[int], groups, texts,
                   params: GroupParams) -> Iterator[tuple[int, dict | None]]:
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
        yield todo[k], cast("dict | None", answer)  # parse_summary's


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
    return summarize_into(folder, dataset, params, groups, partial, stage_name)


def finish_summaries(folder, stage_name: str) -> None:
    """Drop the stage's partial summary file once the stage folder is written."""
    for partial in folder.path.glob(f".{stage_name}.*.partial.jsonl"):
        partial.unlink()


def _stage_params(stage_name: str, params: GroupParams) -> GroupParams:
    construction = cast(Literal["kmeans", "random"], stage_name.removeprefix("groups_"))  # groups_kmeans, groups_random
    return params if stage_name == "groups" else replace(params, construction=construction)


def _build(stage_name: str):
    def build(folder: OpenIndex, dataset: Dataset, params: GroupParams) -> dict:
        params = _stage_params(stage_name, params)
        start = time.perf_counter()
        groups = _partition(folder, dataset, params)
        partition_seconds = time.perf_counter() - start
        merging = folder.merging_shards and calls_generator(params)
        if merging:  # every summary from the shards' answers: no model is loaded
            records, info = shards.merged_summaries(folder, params, stage_name, groups)
        else:
            records, info = summarize_groups(folder, dataset, params, stage_name, groups)
        stats = write_groups(folder.path / stage_name, dataset.doc_ids, groups, records)
        finish_summaries(folder, stage_name)
        if merging:
            shards.remove_shards(folder, stage_name)
        return {**stats, **info, "partition_seconds": round(partition_seconds, 2),
                "seconds": round(time.perf_counter() - start, 2)}

    return build


def _shard(stage_name: str):
    """Shard (I, N) of the stage's summaries, into the index folder's ``shards/`` (``summary_shards.py``)."""

    def shard(folder: OpenIndex, dataset: Dataset, params: GroupParams, which: tuple[int, int],
              log=print) -> dict:
        params = _stage_params(stage_name, params)
        groups = _partition(folder, dataset, params)

        def answer(log_file: Path, mine: list[int]) -> dict:
            return summarize_into(folder, dataset, params, groups, log_file, stage_name, mine)[1]

        root = shards.shards_root(folder, stage_name, groups, params)
        return shards.answer_shard(folder, stage_name, root, len(groups), which, answer, log=log)

    return shard


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


register(Stage("groups", GroupParams, _build("groups"), requires=("embeddings", "knn_graph"),
               shard=_shard("groups")))
for _control in ("groups_kmeans", "groups_random"):  # App. C.2's controls: as many groups as the Leiden ones
    register(Stage(_control, GroupParams, _build(_control), requires=("groups",), shard=_shard(_control)))
register(Stage("groups_soft", SoftGroupParams, _learned_elsewhere, requires=("embeddings", "knn_graph", "groups")))
