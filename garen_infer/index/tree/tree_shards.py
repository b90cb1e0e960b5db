"""The top-down tree's document summaries in shards (``index --shard I/N``, then ``index --merge-shards``).

Top-down construction asks two kinds of prompt: one per document for its level summaries, which depends on
the document alone, and one per oversized node for its clustering, which depends on the answer its parent
got. The first kind shards as the group summaries do (``grouping/summary_shards.py``): shard I asks for
documents ``d`` with ``d % N == I - 1`` and appends each parsed answer (or null, when every attempt failed)
to its own log. The merge takes every document's answer from the shards, gives the nulls the extractive
fallback an unsharded build gives them, and asks the clustering prompts itself, each as soon as its parent
is answered. Bottom-up descriptions do not shard: a level's clusters are made from the embedded descriptions
of the level below, so every level would wait for all N shards.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from garen_infer.index.grouping.summary_shards import answer_shard, merged_records, shards_root, summed
from garen_infer.index.tree.tree_top_down import level_chat, parse_levels
from garen_infer.storage.append_log import read_finished

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.index.open_index import OpenIndex

STAGE = "semantic_tree"


def _root(folder: OpenIndex, params) -> Path:
    return shards_root(folder, STAGE, {"corpus": folder.manifest["corpus"]["fingerprint"]}, params)


def shard_levels(folder: OpenIndex, dataset: Dataset, params, which: tuple[int, int],
                 log=print) -> dict | None:
    """Shard ``which`` (I, N) of the top-down tree's document summaries; None (and a line) for bottom-up."""
    if params.construction != "top-down":
        log(f"[index] {STAGE}: {params.construction} descriptions do not shard (each level is made from the "
            f"one below); --merge-shards builds it")
        return None
    texts = [d.full_text for d in dataset.documents]

    def answer(log_file: Path, mine: list[int]) -> dict:
        from garen_infer.llm.json_generation import release_stage_generator, stage_generator, stream_json

        todo = [d for d in mine if d not in read_finished(log_file, "doc")]
        if not todo:
            return {"truncated_prompts": 0, "answer_problems": {}}
        generator = stage_generator(params.summarizer, folder, texts)
        answers = stream_json(generator, len(todo), lambda k: level_chat(texts[todo[k]], params),
                              lambda _, text: parse_levels(text, params.summary_levels), params.retries,
                              params.batch_size)
        with open(log_file, "a", encoding="utf-8") as out:
            for k, levels in answers:
                out.write(json.dumps({"doc": todo[k], "levels": levels}, ensure_ascii=False) + "\n")
                out.flush()  # kept if the shard stops here; run again, it asks only for the rest
        return release_stage_generator(generator, STAGE)

    return answer_shard(folder, STAGE, _root(folder, params), len(texts), which, answer, what="documents",
                        log=log)


def merged_levels(folder: OpenIndex, params, n_docs: int) -> tuple[list, dict]:
    """Every document's parsed level summaries (None where the shard's attempts all failed), in corpus order,
    and the shards' manifest facts; one line when the shards cannot make the whole corpus."""
    records, infos, count = merged_records(STAGE, _root(folder, params), n_docs, "doc", "documents")
    facts = summed(infos, ("truncated_prompts", "answer_problems"))
    return [r["levels"] for r in records], {**facts, "level_shards": count}
