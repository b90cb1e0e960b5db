"""One method with its settings over a dataset and its index: what every door runs (``garen-infer run``, bench
cells, the Python API, PyTerrier, ``garen-train mine``).

A ``Session`` holds the dataset, the index, the run configuration, the response cache and the models (loaded once,
at the first query that needs them). ``search(queries)`` answers queries in memory; ``run(out)`` answers the
dataset's judged queries into a run folder.

Run folder: ``config.json`` (the resolved configuration), ``trace.jsonl`` (one line per finished query:
ranking, ledger, method diagnostics; appended and flushed as each query finishes), then ``run.trec`` and
``metrics.json`` (written atomically once every query is done). Started again, a run skips the queries already
in ``trace.jsonl``; once a query has finished, a configuration that differs from the saved one is refused
rather than mixed in (before that, a corrected command simply replaces the configuration of one that failed).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from garen_infer.configuration.run_config import RunConfig
from garen_infer.configuration.shards import parse_shard
from garen_infer.data.dataset import Dataset, Query
from garen_infer.errors import GarenError
from garen_infer.llm.oracle import banner, simulation_label
from garen_infer.running.engine_report import engine_records
from garen_infer.running.results import RunResults
from garen_infer.running.runner import (
    answer_queries,
    configure_method,
    model_roles,
    query_states,
    require_stages,
    run_queries,
    to_stderr,
    what_answers,
)
from garen_infer.storage.append_log import read_finished
from garen_infer.storage.atomic import atomic_path, write_json
from garen_infer.storage.writer_lock import writer_lock

if TYPE_CHECKING:
    from garen_infer.index.folder import IndexFolder
    from garen_infer.llm.roles import Roles


@dataclass
class Session:
    """``config`` over ``dataset`` on ``index``. ``cache``: the response cache (None: the default one); ``roles``:
    models already built (None: the configuration's, loaded at the first query that needs them)."""

    dataset: Dataset
    index: IndexFolder
    config: RunConfig
    cache: object = None
    roles: Roles | None = None
    log: Callable[[str], None] = to_stderr

    def models(self) -> Roles:
        """The models the method asks for, loaded once, after the index is known to hold every stage it reads."""
        if self.roles is None:
            require_stages(self.index, self.config)
            self.roles = model_roles(self.config, self.dataset, self.index, self.cache)
        return self.roles

    def limited(self, limit: int) -> Session:
        """The same session over the first ``limit`` judged queries, sharing its models."""
        return replace(self, config=replace(self.config, limit=limit), roles=self.models())

    def queries(self) -> list[Query]:
        """The judged queries ``run`` answers, in the dataset's order (``limit`` and ``shard`` applied)."""
        return run_queries(self.dataset, self.config)

    def search(self, queries: list[Query], first: list | None = None) -> RunResults:
        """Answer ``queries`` in memory, from the configured first stage or from ``first`` (corpus rows per query,
        best first, or row -> score in that order); the dataset's judgements are not given to them."""
        asked = Dataset(self.dataset.name, self.dataset.documents, queries)
        method_cls, _, method, budget = configure_method(asked, self.index, self.config)
        self._notice(method, budget)
        roles = self.models()
        states = query_states(asked, self.index, self.config, method, budget, queries, first)
        records = {r["qid"]: r for r in answer_queries(asked, self.index, self.config, method, states, roles)}
        return RunResults(asked, self.config.method, queries, records, method_cls)

    def run(self, out: str | Path) -> dict:
        """Answer the judged queries into the run folder ``out`` (resuming it), which no other process may write
        meanwhile; returns the metrics."""
        with writer_lock(out, "run folder"):
            return self._run(Path(out))

    def _run(self, out: Path) -> dict:
        method_cls, options, method, budget = configure_method(self.dataset, self.index, self.config)
        self._notice(method, budget)
        resolved = self._resolved(options, budget)
        queries = self.queries()  # a shard too many for the queries is refused before anything is written
        simulation = simulation_label(self.config.models, self.roles)  # a run of the oracle never passes for a model's
        if simulation:
            resolved["simulation"] = simulation
            self.log(banner(simulation))
        done = open_run_folder(out, resolved, self.log)
        todo = [q for q in queries if q.id not in done]
        if done:
            self.log(f"[run] resuming: {len(done)} of {len(queries)} queries already finished")
        if todo:  # what the engines started with, beside what was asked
            record_engines(out / "config.json", engine_records(self.models(), self.config, self.log))
        wall = self._answer_into(out / "trace.jsonl", method, budget, todo, done, len(queries)) if todo else 0.0
        write_trace_in_order(out / "trace.jsonl", [done[q.id] for q in queries])
        engines = json.loads((out / "config.json").read_text(encoding="utf-8")).get("engines")
        results = RunResults(self.dataset, self.config.method, queries, done, method_cls, simulation,
                             self.config.models,
                             wall, len(todo), warn_share=self.config.unusable_answers_warning, engines=engines)
        return results.write(out, self.log)

    def _notice(self, method, budget) -> None:
        """The method's notice about these options (``Method.notice``), once per session, not once per query."""
        line = method.notice(budget)
        if line and self.__dict__.get("_noticed") != line:
            self.__dict__["_noticed"] = line
            self.log(line)

    def _resolved(self, options, budget) -> dict:
        """The configuration ``config.json`` records, as it reads back from disk (tuples become lists)."""
        config, index, dataset = self.config, self.index, self.dataset
        resolved = {
            "dataset": dataset.name, "corpus_fingerprint": dataset.fingerprint(), "index": str(index.path),
            # a stage rebuilt with other params between an interruption and a resume must not be mixed in
            "index_stages": {s: index.manifest["stages"][s]["params"] for s in sorted(config.index_stages)
                             if index.has(s)},
            "method": config.method, "method_options": asdict(options), "budget": budget,
            "first_stage": asdict(config.first_stage), "models": config.models,
            "limit": config.limit,
        }
        if config.shard:  # only in a shard's folder, so an unsharded run's config.json reads as it always did
            resolved["shard"] = parse_shard(config.shard).as_config()
        return resolved

    def _answer_into(self, trace_path: Path, method, budget, todo: list[Query], done: dict, total: int) -> float:
        """Answer ``todo``, appending each record to the trace (and to ``done``) as it finishes; the seconds it took."""
        roles = self.models()
        states = query_states(self.dataset, self.index, self.config, method, budget, todo)
        start = time.perf_counter()
        resume = f"{total} queries are saved in {trace_path}; run the same command again to resume"
        with open(trace_path, "a", encoding="utf-8") as trace:
            try:
                for record in answer_queries(self.dataset, self.index, self.config, method, states, roles):
                    append_record(trace, record)
                    done[record["qid"]] = record
            except KeyboardInterrupt:
                raise GarenError(f"interrupted: {len(done)} of {resume}") from None
            except GarenError as err:
                raise GarenError(f"{err}\n{len(done)} of {resume}") from None
        return time.perf_counter() - start


def execute(dataset: Dataset, index: IndexFolder, config: RunConfig, out: str | Path, roles=None, cache=None,
            log=to_stderr) -> dict:
    """Run ``config`` over the dataset into the run folder ``out`` (``Session.run``); returns the metrics."""
    return Session(dataset, index, config, cache, roles, log).run(out)


def open_run_folder(out: Path, resolved: dict, log=to_stderr) -> dict:
    """The records already finished in ``out``, once its configuration is known to be ``resolved``'s: a folder is
    pinned by its first finished query (a run that failed before one pins nothing, and is simply replaced)."""
    out.mkdir(parents=True, exist_ok=True)
    config_path = out / "config.json"
    resolved = json.loads(json.dumps(resolved))  # as it reads back from disk (tuples become lists)
    done = read_finished(out / "trace.jsonl", "qid", log)
    saved = saved_config(config_path, done)
    if done and saved is not None:
        before, now = what_answers(saved), what_answers(resolved)
        if before != now:
            diff = sorted(k for k in set(now) | set(before) if before.get(k) != now.get(k))
            raise GarenError(f"{out}: holds a run with a different configuration ({', '.join(diff)} differ); "
                             "use another --out folder")
    if saved != resolved:
        write_json(config_path, resolved)
    return done


def record_engines(config_path: Path, engines: dict) -> None:
    """Add the engines' actual limits to ``config.json``; a resume is not refused for them (``what_answers``)."""
    saved = json.loads(config_path.read_text(encoding="utf-8"))
    if engines and saved.get("engines") != engines:
        write_json(config_path, {**saved, "engines": engines})


def saved_config(config_path: Path, done: dict) -> dict | None:
    """The configuration a run folder was started with; None for a new folder. Finished queries without it are
    refused: nothing says which configuration answered them, so they could be neither trusted nor relabelled."""
    if not config_path.exists():
        if done:
            raise GarenError(f"{config_path}: missing, yet {config_path.parent / 'trace.jsonl'} holds {len(done)} "
                             f"finished queries of an unknown configuration; use another --out folder (or delete "
                             f"that trace.jsonl to start this one afresh)")
        return None
    try:
        saved = json.loads(config_path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as err:
        raise GarenError(f"{config_path}: unreadable ({err}); use another --out folder") from None
    if not isinstance(saved, dict):
        raise GarenError(f"{config_path}: not a run configuration; use another --out folder")
    return saved


def append_record(trace, record: dict) -> None:
    """One finished query's line, on disk before the next one starts (a kill loses no finished query)."""
    trace.write(json.dumps(record, ensure_ascii=False) + "\n")
    trace.flush()
    os.fsync(trace.fileno())


def write_trace_in_order(path: Path, records: list[dict]) -> None:
    """The finished trace, rewritten in the queries' order (it was appended in the order queries finished), so a
    run's files do not depend on scheduling: the same queries give the same trace, however they were split."""
    lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in records]
    if path.exists() and path.read_text(encoding="utf-8") == "".join(lines):
        return
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        handle.writelines(lines)
