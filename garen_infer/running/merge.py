"""``garen-infer merge SHARD... --out DIR``: the run folders of ``garen-infer run --shard i/n`` joined into the run
folder an unsharded run of the same configuration writes.

The shards must be one configuration (their ``config.json`` equal but for ``shard``), disjoint (no shard twice) and
complete (every shard 1..n given and finished, each holding exactly its queries of the dataset). Then ``config.json``,
``trace.jsonl``, ``run.trec`` and ``metrics.json`` are written by the runner's own code from the shards' records, in
the dataset's query order, so they equal an unsharded run's files (measured seconds aside: those are the shards'
own). ``merge.json`` says which folders were merged. ``--partial`` merges what is there and says so in
``metrics.json`` (``"partial"``); running the unsharded command on that folder later completes it.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from garen_infer.configuration.shards import Shard
from garen_infer.errors import GarenError
from garen_infer.storage.append_log import read_finished
from garen_infer.storage.atomic import remove_stale_temporaries, write_json
from garen_infer.storage.writer_lock import LOCK_NAME, writer_lock

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset


MERGE_RECORD = "merge.json"


@dataclass
class ShardFolder:
    folder: Path
    config: dict  # config.json without "shard"
    shard: Shard
    records: dict  # qid -> trace record
    finished: bool  # metrics.json written: every query of the shard done


def read_shard_config(folder: Path, what: str = "run folder") -> tuple[dict, Shard]:
    """A shard's configuration (without ``shard``) and its shard, or one line saying why the folder is not one."""
    path = folder / "config.json"
    if not path.is_file():
        if (folder / "manifest.json").is_file():
            raise GarenError(f"{folder}: a 'garen-train mine' folder; merge mined shards with 'garen-train merge'")
        raise GarenError(f"{folder}: no config.json, so not a {what} of 'garen-infer run --shard I/N'")
    config = json.loads(path.read_text(encoding="utf-8"))
    if "shard" not in config:
        raise GarenError(f"{folder}: not a shard (its config.json has no 'shard'); only folders of runs with "
                         "--shard I/N are merged")
    shard = config.pop("shard")
    return config, Shard(shard["index"], shard["count"])


def what_it_computes(config: dict) -> dict:
    """A run's configuration without the settings that only say how an OpenAI-compatible server was reached (each
    shard may have its own replicas); the merged folder keeps the first shard's."""
    from garen_infer.llm.backends.openai_backend import CONNECTION_SETTINGS

    models = {role: {k: v for k, v in spec.items() if spec.get("backend") != "openai" or k not in CONNECTION_SETTINGS}
              for role, spec in (config.get("models") or {}).items()}
    return {**config, "models": models}


def check_one_configuration(shards: list[tuple[Path, dict, Shard]]) -> int:
    """Refuse shards of different configurations or splits, or one shard given twice; returns the shard count."""
    first_folder, first_config, first_shard = shards[0]
    seen: dict[int, Path] = {}
    for folder, config, shard in shards:
        if what_it_computes(config) != what_it_computes(first_config):
            keys = sorted(
                k
                for k in set(config) | set(first_config)
                if what_it_computes(config).get(k) != what_it_computes(first_config).get(k)
            )
            raise GarenError(f"{folder} and {first_folder} are runs of different configurations "
                             f"({', '.join(keys)} differ); merge only the shards of one command")
        if shard.count != first_shard.count:
            raise GarenError(f"{folder} is shard {shard} but {first_folder} is shard {first_shard}: the "
                             f"shards of one split have the same N")
        if shard.index in seen:
            raise GarenError(f"{folder} and {seen[shard.index]} are both shard {shard}; give each shard once")
        seen[shard.index] = folder
    return first_shard.count


def missing_shards(present: list[Shard], count: int) -> list[Shard]:
    have = {s.index for s in present}
    return [Shard(k, count) for k in range(1, count + 1) if k not in have]


def check_out_folder(out: Path, shard_folders: list[Path], earlier: Path = Path(MERGE_RECORD)) -> None:
    """The merged folder is new, empty (but for a lock and a killed writer's temporaries), or an earlier merge,
    finished or not (holding ``earlier``; rewritten); never a shard or another run. Call it under ``out``'s writer
    lock."""
    resolved = out.resolve()
    if any(resolved == f.resolve() for f in shard_folders):
        raise GarenError(f"--out {out} is one of the shards; merge into another folder")
    if not out.is_dir():
        return
    remove_stale_temporaries(out)
    if not (out / earlier).is_file() and any(p.name != LOCK_NAME for p in out.iterdir()):
        raise GarenError(f"--out {out}: exists and holds something other than an earlier merge; choose a new folder")


def mark_merging(out: Path, folders: list[Path]) -> None:
    """Claim ``out`` for this merge before its first output is written, so that a merge killed at any point is
    rerun into the same folder; the finished merge rewrites the record."""
    write_json(out / MERGE_RECORD, {"merging": [str(f) for f in folders]})


def merge_runs(dataset: Dataset, folders: list[str | Path], out: str | Path, partial: bool = False,
               log=print) -> dict:
    """Merge the shard run folders ``folders`` into ``out``; returns the merged metrics."""
    from garen_infer.methods.base import get_method
    from garen_infer.running.results import RunResults
    from garen_infer.running.runner import RunConfig, run_queries, to_stderr
    from garen_infer.running.session import write_trace_in_order

    paths, out = [Path(f) for f in folders], Path(out)
    check_out_folder(out, paths)
    headers = [(f, *read_shard_config(f)) for f in paths]
    count = check_one_configuration(headers)
    config = headers[0][1]
    if config["corpus_fingerprint"] != dataset.fingerprint() or config["dataset"] != dataset.name:
        raise GarenError(f"{paths[0]}: was run on {config['dataset']}, a corpus other than --dataset's {dataset.name}; "
                         f"give the dataset the shards ran on")
    missing = missing_shards([s for _, _, s in headers], count)
    if missing and not partial:
        raise GarenError(f"shard {missing[0]} is missing ({len(missing)} of {count} not given); run it and "
                         f"merge again, or pass --partial for a run labelled partial")
    all_queries = run_queries(dataset, RunConfig.build(config["method"], limit=config.get("limit")))
    with ExitStack() as stack:
        for folder in paths:  # no shard changes while it is read; one still running is named with its process
            stack.enter_context(writer_lock(folder, "run folder"))
        shards = [
            ShardFolder(f, c, s, read_finished(f / "trace.jsonl", "qid"), (f / "metrics.json").is_file())
            for f, c, s in headers
        ]
        for part in shards:
            expected = {q.id for q in part.shard.select(all_queries)}
            strays = sorted(set(part.records) - expected)
            if strays:
                raise GarenError(f"{part.folder}: holds query {strays[0]}, which is not in shard {part.shard} of "
                                 f"{dataset.name} ({len(strays)} such); were the shards run on another queries file?")
            if not part.finished and not partial:
                raise GarenError(f"{part.folder}: shard {part.shard} is not finished ({len(part.records)} of "
                                 f"{len(expected)} queries); run its command again to resume it, or pass --partial")
        done = {qid: r for part in shards for qid, r in part.records.items()}
        queries = [q for q in all_queries if q.id in done]
        label = None
        if len(queries) < len(all_queries):
            label = {"partial": f"{len(queries)} of {len(all_queries)} queries"
                                + (f"; shard(s) {', '.join(map(str, missing))} missing" if missing else "")
                                + "; the metrics are over these queries only"}
        timed = [(part.records, json.loads((part.folder / "metrics.json").read_text()).get("wall_seconds_per_query"))
                 for part in shards if part.finished]
        timed_all = len(timed) == len(shards) and all(w is not None for _, w in timed)
        wall = sum(w * len(records) for records, w in timed) if timed_all else 0.0
        mark_merging(out, paths)
        write_json(out / "config.json", config)
        write_trace_in_order(out / "trace.jsonl", [done[q.id] for q in queries])
        results = RunResults(dataset, config["method"], queries, done, get_method(config["method"]),
                             config.get("simulation"),
                             config["models"], wall, len(queries) if timed_all else 0, label)
        metrics = results.write(out, log=to_stderr)
        write_json(
            out / MERGE_RECORD,
            {
                "shards": [
                    {
                        "shard": str(p.shard),
                        "folder": str(p.folder),
                        "queries": len(p.records),
                        "finished": p.finished,
                    }
                    for p in shards
                ],
                "missing": [str(s) for s in missing],
                "partial": label is not None,
            },
        )
    log(f"[merge] {out}: {len(queries)} of {len(all_queries)} queries from {len(shards)} of {count} shards"
        + (" (partial)" if label else ""))
    return metrics
