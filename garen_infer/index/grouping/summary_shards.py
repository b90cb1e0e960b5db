"""Group summaries answered in shards: ``garen-infer index --shard I/N``, then ``garen-infer index --merge-shards``.

Every shard computes the partition itself from the stages the index folder already holds (the k-NN graph, the
embeddings: deterministic, so every shard finds the same groups) and asks the summarizer only for groups
``g`` with ``g % N == I - 1``. Its summaries go to an append log of its own, so shards on different hosts never
write one file:

    <index>/shards/<stage>/<digest>/shard-<I>-of-<N>/summaries.jsonl   one record per group, as the build writes
    <index>/shards/<stage>/<digest>/shard-<I>-of-<N>/finished.json      the shard's groups and manifest facts

``digest`` names the partition and every setting that changes a summary (not how a server is reached, so each
shard may use its own), so a shard of another partition or summarizer is never merged. A shard holds its folder's
writer lock while it runs; run again, it asks only for the groups its log lacks, and a finished shard asks for
nothing. The merge (an ordinary build given ``--merge-shards``) takes every shard's records, refuses one line when
a shard is missing, unfinished, of another split, or holds a group that is not its own, and writes the stage
from the records in group order with the code an unsharded build uses: the same stage files, given the same
answers.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from garen_infer.errors import GarenError
from garen_infer.settings import identity
from garen_infer.storage.append_log import read_finished
from garen_infer.storage.atomic import write_json
from garen_infer.storage.writer_lock import writer_lock

if TYPE_CHECKING:
    from garen_infer.index.open_index import OpenIndex

SHARDS = "shards"  # the index folder's sub-folder holding the shards' answers
SUMMARIES = "summaries.jsonl"
FINISHED = "finished.json"
_SHARD_FOLDER = re.compile(r"shard-(\d+)-of-(\d+)")

# (folder, dataset, params, groups, log file, stage, groups to summarise) -> (their records, manifest facts)
Summarize = Callable[..., tuple[list[dict], dict]]


def shard_groups(n_groups: int, index: int, count: int) -> list[int]:
    """Shard ``index`` of ``count``'s groups: every ``count``-th, from group ``index - 1``."""
    return list(range(index - 1, n_groups, count))


def summary_identity(params) -> dict:
    """What changes a summary: the stage's params but for how they run (batch size) and, for a served
    summarizer, how the server is reached (base_url, concurrency, ...)."""
    from garen_infer.llm.backends.openai_backend import CONNECTION_SETTINGS

    values = identity(type(params), asdict(params))
    spec = values.get("summarizer") or {}
    if spec.get("backend") == "openai":
        values["summarizer"] = {k: v for k, v in spec.items() if k not in CONNECTION_SETTINGS}
    return values


def shards_root(folder: OpenIndex, stage_name: str, groups: list[list[int]], params) -> Path:
    payload = json.dumps({"stage": stage_name, "groups": groups, "params": summary_identity(params)},
                         sort_keys=True, default=str)
    return folder.path / SHARDS / stage_name / hashlib.sha256(payload.encode()).hexdigest()[:16]


def shard_folder(root: Path, index: int, count: int) -> Path:
    return root / f"shard-{index}-of-{count}"


def answer_shard(folder: OpenIndex, dataset, params, stage_name: str, groups: list[list[int]],
                 shard: tuple[int, int], summarize: Summarize, log=print) -> dict:
    """Summarise shard ``shard`` (I, N)'s groups into its own folder; what it did, for the command's summary."""
    index, count = shard
    if count > len(groups):
        raise GarenError(f"--shard {index}/{count}: stage '{stage_name}' has {len(groups)} groups, which cannot fill "
                         f"{count} shards; use at most {len(groups)}")
    mine = shard_groups(len(groups), index, count)
    path = shard_folder(shards_root(folder, stage_name, groups, params), index, count)
    with writer_lock(path, "index shard"):
        if (path / FINISHED).is_file():
            log(f"[index] {stage_name}: shard {index}/{count} finished already ({len(mine)} groups), nothing asked")
            return {"stage": stage_name, "shard": f"{index}/{count}", "groups": len(mine), "folder": str(path)}
        records, info = summarize(folder, dataset, params, groups, path / SUMMARIES, stage_name, mine)
        write_json(path / FINISHED, {"shard": {"index": index, "count": count}, "groups": mine, "info": info})
    log(f"[index] {stage_name}: shard {index}/{count} finished, {len(records)} groups in {path}")
    return {"stage": stage_name, "shard": f"{index}/{count}", "groups": len(mine), "folder": str(path)}


def merged_summaries(folder: OpenIndex, params, stage_name: str, groups: list[list[int]]) -> tuple[list[dict], dict]:
    """Every group's record from the finished shards, in group order, and the stage's manifest facts; one line
    when the shards cannot make the whole stage."""
    root = shards_root(folder, stage_name, groups, params)
    count = _split_of(root, stage_name)
    records: dict[int, dict] = {}
    totals: dict = {"summary_fallbacks": 0, "truncated_prompts": 0, "answer_problems": Counter()}
    for index in range(1, count + 1):
        path = shard_folder(root, index, count)
        if not path.is_dir():
            raise GarenError(f"stage '{stage_name}': shard {index}/{count} is missing (no {path}); run 'garen-infer "
                             f"index --shard {index}/{count}' with this preset and merge again")
        with writer_lock(path, "index shard"):  # a shard still running is named with its process
            records.update(_shard_records(path, stage_name, len(groups), index, count, totals))
    info = {"summarizer": params.summarizer.get("model", "extractive"), "summary_fallbacks": totals["summary_fallbacks"],
            "truncated_prompts": totals["truncated_prompts"],
            "answer_problems": dict(sorted(totals["answer_problems"].items())), "summary_shards": count}
    return [records[g] for g in range(len(groups))], info


def _split_of(root: Path, stage_name: str) -> int:
    """The N of the shards under ``root``: one split only."""
    counts = sorted({int(m.group(2)) for p in (root.iterdir() if root.is_dir() else ())
                     if (m := _SHARD_FOLDER.fullmatch(p.name))})
    if not counts:
        others = sorted(p.name for p in root.parent.iterdir()) if root.parent.is_dir() else []
        hint = (f" (the shards under {root.parent} are of another partition or summarizer: {', '.join(others)})"
                if others else "")
        raise GarenError(f"stage '{stage_name}': no shards of this partition and summarizer in {root}{hint}; run "
                         f"'garen-infer index --shard I/N' with this preset for every I first")
    if len(counts) > 1:
        raise GarenError(f"stage '{stage_name}': {root} holds shards of {len(counts)} splits (of "
                         f"{' and of '.join(map(str, counts))}); keep the shard-*-of-N folders of one N")
    return counts[0]


def _shard_records(path: Path, stage_name: str, n_groups: int, index: int, count: int, totals: dict) -> dict[int, dict]:
    """A finished shard's records, checked to be exactly its groups; its manifest facts added to ``totals``."""
    if not (path / FINISHED).is_file():
        done = len(read_finished(path / SUMMARIES, "group"))
        raise GarenError(f"stage '{stage_name}': shard {index}/{count} is not finished ({done} of "
                         f"{len(shard_groups(n_groups, index, count))} groups in {path / SUMMARIES}); run its "
                         f"command again to resume it")
    records = read_finished(path / SUMMARIES, "group")
    expected = shard_groups(n_groups, index, count)
    strays = sorted(set(records) - set(expected))
    lacking = sorted(set(expected) - set(records))
    if strays or lacking:
        what = f"holds group {strays[0]}, which is not its own" if strays else f"lacks group {lacking[0]}"
        raise GarenError(f"stage '{stage_name}': shard {index}/{count} in {path} {what}; remove that folder and "
                         f"run 'garen-infer index --shard {index}/{count}' again")
    info = json.loads((path / FINISHED).read_text(encoding="utf-8"))["info"]
    totals["summary_fallbacks"] += info.get("summary_fallbacks", 0)
    totals["truncated_prompts"] += info.get("truncated_prompts", 0)
    totals["answer_problems"].update(info.get("answer_problems", {}))
    return {g: records[g] for g in expected}


def remove_shards(folder: OpenIndex, stage_name: str) -> None:
    """Drop the stage's shards once the stage is written from them (an empty ``shards/`` goes too)."""
    shutil.rmtree(folder.path / SHARDS / stage_name, ignore_errors=True)
    root = folder.path / SHARDS
    if root.is_dir() and not any(root.iterdir()):
        root.rmdir()
