"""Model prompts answered in shards: ``garen-infer index --shard I/N``, then ``index --merge-shards``.

Used by the group summaries (one prompt per group) and by the top-down tree's document summaries (one per
document, ``tree/tree_shards.py``). Every shard computes what the prompts are made from itself, from the
stages the index folder already holds (the partition from the k-NN graph: deterministic, so every shard
finds the same groups), and asks only for items ``k`` with ``k % N == I - 1``. Its answers go to an append
log of its own, so shards on different hosts never write one file:

    <index>/shards/<stage>/<digest>/shard-<I>-of-<N>/summaries.jsonl   one record per item, as answered
    <index>/shards/<stage>/<digest>/shard-<I>-of-<N>/finished.json      the shard's items and manifest facts

``digest`` names the items (the partition, or the corpus) and every setting that changes an answer (not how
a server is reached, so each shard may use its own): a shard of another partition or summarizer is never
merged. A shard holds its folder's writer lock while it runs; run again, it asks only for the items its log
lacks, and a finished shard asks for nothing. The merge (an ordinary build given ``--merge-shards``) takes
every shard's records, refuses in one line a shard that is missing, unfinished, of another split, or holds
an item that is not its own, and writes the stage from the records in item order with the code an unsharded
build uses: the same stage files, given the same answers.
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


def shard_items(n_items: int, index: int, count: int) -> list[int]:
    """Shard ``index`` of ``count``'s items (groups, documents): every ``count``-th from ``index - 1``."""
    return list(range(index - 1, n_items, count))


def summary_identity(params) -> dict:
    """What changes an answer: the stage's params but for how they run (batch size) and, for a served
    summarizer, how the server is reached (base_url, concurrency, ...)."""
    from garen_infer.llm.backends.openai_backend import CONNECTION_SETTINGS

    values = identity(type(params), asdict(params))
    spec = values.get("summarizer") or {}
    if spec.get("backend") == "openai":
        values["summarizer"] = {k: v for k, v in spec.items() if k not in CONNECTION_SETTINGS}
    return values


def shards_root(folder: OpenIndex, stage_name: str, items: object, params) -> Path:
    """Where the shards of a stage's prompts lie: named by ``items`` (what the prompts are made from: the
    partition, or the corpus) and the params that change an answer."""
    payload = json.dumps({"stage": stage_name, "items": items, "params": summary_identity(params)},
                         sort_keys=True, default=str)
    return folder.path / SHARDS / stage_name / hashlib.sha256(payload.encode()).hexdigest()[:16]


def shard_folder(root: Path, index: int, count: int) -> Path:
    return root / f"shard-{index}-of-{count}"


def answer_shard(folder: OpenIndex, stage_name: str, root: Path, n_items: int, shard: tuple[int, int],
                 answer: Callable[[Path, list[int]], dict], what: str = "groups", log=print) -> dict:
    """Shard ``shard`` (I, N) of a stage's ``n_items`` prompts: ``answer(log file, its items)`` appends each
    item's record to the log as it comes (skipping those it holds) and returns the shard's manifest facts.
    What it did, for the command's summary."""
    index, count = shard
    if count > n_items:
        raise GarenError(f"--shard {index}/{count}: stage '{stage_name}' has {n_items} {what}, which cannot "
                         f"fill {count} shards; use at most {n_items}")
    mine = shard_items(n_items, index, count)
    path = shard_folder(root, index, count)
    done = {"stage": stage_name, "shard": f"{index}/{count}", "prompts": len(mine), "of": what,
            "folder": str(path)}
    with writer_lock(path, "index shard"):
        if (path / FINISHED).is_file():
            log(f"[index] {stage_name}: shard {index}/{count} finished already ({len(mine)} {what}), "
                f"nothing asked")
            return done
        info = answer(path / SUMMARIES, mine)
        write_json(path / FINISHED, {"shard": {"index": index, "count": count}, "items": mine, "info": info})
    log(f"[index] {stage_name}: shard {index}/{count} finished, {len(mine)} {what} in {path}")
    return done


def merged_records(stage_name: str, root: Path, n_items: int, key: str,
                   what: str = "groups") -> tuple[list[dict], list[dict], int]:
    """Every item's record from the finished shards under ``root``, in item order (``key``: the item's field
    in a record), each shard's manifest facts, and N; one line when the shards cannot make the whole stage."""
    count = _split_of(root, stage_name)
    records: dict[int, dict] = {}
    infos = []
    for index in range(1, count + 1):
        path = shard_folder(root, index, count)
        if not path.is_dir():
            raise GarenError(f"stage '{stage_name}': shard {index}/{count} is missing (no {path}); run "
                             f"'garen-infer index --shard {index}/{count}' with this preset and merge again")
        with writer_lock(path, "index shard"):  # a shard still running is named with its process
            records.update(_shard_records(path, stage_name, n_items, (index, count), key, what))
            infos.append(json.loads((path / FINISHED).read_text(encoding="utf-8"))["info"])
    return [records[k] for k in range(n_items)], infos, count


def summed(infos: list[dict], keys: tuple[str, ...]) -> dict:
    """The shards' manifest facts ``keys`` added up (numbers; ``answer_problems``: counts by kind)."""
    out: dict = {}
    for key in keys:
        if key == "answer_problems":
            total: Counter = Counter()
            for info in infos:
                total.update(info.get(key, {}))
            out[key] = dict(sorted(total.items()))
        else:
            out[key] = sum(info.get(key, 0) for info in infos)
    return out


def merged_summaries(folder: OpenIndex, params, stage_name: str,
                     groups: list[list[int]]) -> tuple[list[dict], dict]:
    """Every group's record from the finished shards, in group order, and the stage's manifest facts."""
    root = shards_root(folder, stage_name, groups, params)
    records, infos, count = merged_records(stage_name, root, len(groups), "group")
    info = {"summarizer": params.summarizer.get("model", "extractive"),
            **summed(infos, ("summary_fallbacks", "truncated_prompts", "answer_problems")),
            "summary_shards": count}
    return records, info


def _split_of(root: Path, stage_name: str) -> int:
    """The N of the shards under ``root``: one split only."""
    counts = sorted({int(m.group(2)) for p in (root.iterdir() if root.is_dir() else ())
                     if (m := _SHARD_FOLDER.fullmatch(p.name))})
    if not counts:
        others = sorted(p.name for p in root.parent.iterdir()) if root.parent.is_dir() else []
        hint = (f" (the shards under {root.parent} are of another partition or summarizer: "
                f"{', '.join(others)})" if others else "")
        raise GarenError(f"stage '{stage_name}': no shards of this partition and summarizer in {root}{hint}; "
                         f"run 'garen-infer index --shard I/N' with this preset for every I first")
    if len(counts) > 1:
        raise GarenError(f"stage '{stage_name}': {root} holds shards of {len(counts)} splits (of "
                         f"{' and of '.join(map(str, counts))}); keep the shard-*-of-N folders of one N")
    return counts[0]


def _shard_records(path: Path, stage_name: str, n_items: int, shard: tuple[int, int], key: str,
                   what: str) -> dict[int, dict]:
    """A finished shard's records, checked to be exactly its items."""
    index, count = shard
    expected = shard_items(n_items, index, count)
    if not (path / FINISHED).is_file():
        done = len(read_finished(path / SUMMARIES, key))
        raise GarenError(f"stage '{stage_name}': shard {index}/{count} is not finished ({done} of "
                         f"{len(expected)} {what} in {path / SUMMARIES}); run its command again to resume it")
    records = read_finished(path / SUMMARIES, key)
    strays = sorted(set(records) - set(expected))
    lacking = sorted(set(expected) - set(records))
    if strays or lacking:
        problem = f"holds {key} {strays[0]}, which is not its own" if strays else f"lacks {key} {lacking[0]}"
        raise GarenError(f"stage '{stage_name}': shard {index}/{count} in {path} {problem}; remove that "
                         f"folder and run 'garen-infer index --shard {index}/{count}' again")
    return {k: records[k] for k in expected}


def remove_shards(folder: OpenIndex, stage_name: str) -> None:
    """Drop the stage's shards once the stage is written from them (an empty ``shards/`` goes too)."""
    shutil.rmtree(folder.path / SHARDS / stage_name, ignore_errors=True)
    root = folder.path / SHARDS
    if root.is_dir() and not any(root.iterdir()):
        root.rmdir()
