"""The ``semantic_tree`` index stage: LATTICE's tree (sec. 2.1, App. B.3), built bottom-up or top-down, or
read from the trees the authors released (``tree_import.py``), and written in the format of
``semantic_tree.py`` (plus, for top-down, ``doc_levels.jsonl``: each document's level summaries).

Generator calls go through the response cache, so an interrupted build asked again replays what it already has.
Top-down's document summaries shard (``index --shard I/N``, ``tree_shards.py``); its clustering and
bottom-up's descriptions do not, since each prompt waits for answers to others.
The manifest says who wrote the descriptions and counts every fallback.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal

from garen_infer.errors import GarenError
from garen_infer.index.grouping.summary_shards import remove_shards
from garen_infer.index.progress import elapsed_bar
from garen_infer.index.stages import Stage, register
from garen_infer.index.tree.semantic_tree import SemanticTree
from garen_infer.index.tree.tree_shards import merged_levels, shard_levels
from garen_infer.llm.model_specs import SUMMARIZER_SPEC
from garen_infer.settings import AtLeast, Count, NonNegative, execution_only
from garen_infer.storage.atomic import atomic_path

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.index.open_index import OpenIndex


@dataclass(frozen=True)
class SemanticTreeParams:
    # App. B.3.1 | sec. 2.1, App. B.3.2 (needs a generator) | the authors' tree in tree_file (GAREN Table 7)
    construction: Literal["bottom-up", "top-down", "released"] = "bottom-up"
    tree_file: str = ""  # released: <task>/tree-<bottom-up|top-down>.pkl of quicktensor/lattice-bright-trees
    max_children: Annotated[int, AtLeast(2)] = 20  # M, the largest branching factor (App. B.1.1: 10-20)
    # node descriptions: extractive,
    summarizer: dict = field(default_factory=lambda: {"backend": "extractive"}, metadata=SUMMARIZER_SPEC)
    #   or a generator spec ({backend: transformers | vllm | openai, model: ...}); top-down needs a generator
    min_clusters: Annotated[int, AtLeast(2)] = 5  # top-down: the generator groups a node's summaries into
    #   [min(min_clusters, M), M] clusters (App. D)
    summary_levels: Count = 5  # top-down: summary levels per document, broad to specific (App. B.1.1: five)
    clustering_context_words: Count = 6000  # top-down: words of summaries one clustering prompt may hold (B.3.2)
    summary_max_words: Count = 150  # words of each member (document or child description) shown to the generator
    retries: NonNegative = 2  # sampled retries after an unusable answer, then the counted fallback
    batch_size: Count = execution_only(32)  # prompts per generator batch
    seed: int = 42  # k-means


def _build(folder: OpenIndex, dataset: Dataset, params: SemanticTreeParams) -> dict:
    from garen_infer.index.tree.tree_describe import NodeDescriber
    from garen_infer.llm.json_generation import release_stage_generator, stage_generator

    start = time.perf_counter()
    if params.construction == "released":
        from pathlib import Path

        from garen_infer.index.tree.tree_import import read_released_tree

        root = read_released_tree(Path(params.tree_file), dataset.doc_ids)
        released = {"construction": "released", "tree_file": Path(params.tree_file).name}
        tree = SemanticTree.from_built(root, {**released, "max_children": max(map(len, _children(root)))})
        _save(folder, tree, dataset.doc_ids, None)
        return {**tree.meta, "seconds": round(time.perf_counter() - start, 2)}
    texts = [d.full_text for d in dataset.documents]
    vectors = folder.embeddings
    generator = stage_generator(params.summarizer, folder, texts)
    info: dict = {"construction": params.construction}
    levels = None
    if params.construction == "bottom-up":
        from garen_infer.index.tree.tree_bottom_up import build_bottom_up

        describer = NodeDescriber(texts, vectors, generator, params.retries, params.batch_size,
                                  params.summary_max_words)

        def embed(descs: list[str]):
            return folder.embedder.encode_documents(descs, show_progress=False)

        with elapsed_bar(f"semantic tree (bottom-up, {len(texts)} documents)") as bar:
            root = build_bottom_up(vectors, texts, describer, embed, params.max_children, params.seed,
                                   log=lambda line: bar.write(line, file=sys.stderr))  # stdout: the summary or --json
        info.update(summarizer=describer.name, description_fallbacks=describer.fallbacks)
    else:
        from garen_infer.index.tree.tree_top_down import TopDownBuilder

        if generator is None:
            raise GarenError(
                "semantic_tree: top-down construction needs a generator to summarise documents and partition nodes "
                "(summarizer: {backend: transformers | vllm | openai, model: ...}); use construction: bottom-up for "
                "extractive descriptions"
            )
        # stdout: the summary or --json
        builder = TopDownBuilder(texts, vectors, generator, params, log=lambda line: print(line, file=sys.stderr))
        answers, sharded = merged_levels(folder, params, len(texts)) if folder.merging_shards else (None, {})
        root, levels = builder.build(answers)
        info.update(summarizer=generator.name, **vars(builder.stats))
    info.update(release_stage_generator(generator, "semantic_tree"))
    shards = {}
    if levels is not None and folder.merging_shards:  # the shards' answers are counted with the clustering's
        info.update(_with_shards(info, sharded))
        # the manifest's, not the tree's meta.json: the tree's files are the unsharded build's
        shards = {"level_shards": sharded["level_shards"]}
    tree = SemanticTree.from_built(root, {**info, "max_children": params.max_children})
    _save(folder, tree, dataset.doc_ids, levels)
    if folder.merging_shards:
        remove_shards(folder, "semantic_tree")
    return {**tree.meta, **shards, "seconds": round(time.perf_counter() - start, 2)}


def _with_shards(info: dict, sharded: dict) -> dict:
    problems = Counter(info.get("answer_problems", {})) + Counter(sharded["answer_problems"])
    return {"truncated_prompts": info.get("truncated_prompts", 0) + sharded["truncated_prompts"],
            "answer_problems": dict(sorted(problems.items()))}


def _save(folder, tree: SemanticTree, doc_ids: list[str], levels) -> None:
    with atomic_path(folder.path / "semantic_tree") as tmp:
        tmp.mkdir()
        tree.save(tmp, doc_ids)
        if levels is not None:
            with open(tmp / "doc_levels.jsonl", "w", encoding="utf-8") as out:
                for doc_id, doc_levels in zip(doc_ids, levels):
                    out.write(json.dumps({"doc": doc_id, "levels": doc_levels}, ensure_ascii=False) + "\n")


def _children(root) -> list[list]:
    """Every internal node's children (a released tree's largest fan-out is its M)."""
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        out.append(node.children)
        stack += [c for c in node.children if not isinstance(c, int)]
    return out


register(Stage("semantic_tree", SemanticTreeParams, _build, requires=("embeddings",), shard=shard_levels))
