"""A run: one method over a dataset's queries, written to a run folder that survives interruption.

Run folder: ``config.json`` (the resolved configuration), ``trace.jsonl`` (one line per finished query:
ranking, ledger, method diagnostics; appended and flushed as each query finishes), then ``run.trec`` and
``metrics.json`` (written atomically once every query is done). Started again, a run skips the queries already
in ``trace.jsonl``; once a query has finished, a configuration that differs from the saved one is refused
rather than mixed in (before that, a corrected command simply replaces the configuration of one that failed).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from garen_infer.configuration.run_config import RunConfig
from garen_infer.data.dataset import Dataset
from garen_infer.errors import GarenError
from garen_infer.evaluation.costs import mean_cost, prices_for
from garen_infer.evaluation.evaluate import evaluate, remove_excluded
from garen_infer.evaluation.reachability import hit_by_hops, reach
from garen_infer.index.first_stage import (
    REWRITE,
    FirstStageConfig,
    excluded_rows,
    first_stage,
    first_stage_texts,
)
from garen_infer.llm.model_specs import spec_identity
from garen_infer.llm.oracle import RUN_TAG, banner, simulation_label
from garen_infer.llm.problems import UNUSABLE
from garen_infer.methods.base import QueryState
from garen_infer.running.engine_report import engine_records
from garen_infer.running.query_rewrite import rewrite_then_search
from garen_infer.running.scheduler import Scheduler
from garen_infer.running.shards import parse_shard
from garen_infer.storage.append_log import read_finished
from garen_infer.storage.atomic import atomic_path, write_json
from garen_infer.storage.trec import write_run
from garen_infer.storage.writer_lock import writer_lock

if TYPE_CHECKING:
    from garen_infer.index.folder import IndexFolder


def to_stderr(line: str) -> None:
    """Where a run's messages go by default: stdout is the metrics' (``garen-infer run`` prints them as JSON)."""
    print(line, file=sys.stderr)


def what_answers(resolved: dict) -> dict:
    """A run's resolved configuration without its models' execution-only settings (memory share, engine sequences,
    timeouts): a run resumes under other ones, since they change how fast answers come, not what they are. A first
    stage saved before one of its fields existed reads with that field's default, which is what the run used."""
    first = resolved.get("first_stage")
    if isinstance(first, dict) and set(first) <= {f.name for f in fields(FirstStageConfig)}:
        resolved = {**resolved, "first_stage": asdict(FirstStageConfig(**first))}
    resolved = {k: v for k, v in resolved.items() if k != "engines"}  # what the engines started with
    models = resolved.get("models")
    if not isinstance(models, dict):
        return resolved
    models = {role: spec_identity(spec) if isinstance(spec, dict) else spec for role, spec in models.items()}
    return {**resolved, "models": models}


def require_stages(index: IndexFolder, config: RunConfig) -> None:
    """Refuses an index that lacks a stage the run reads (the first stage's too), before anything loads."""
    for stage in config.index_stages:
        index.require(stage, f"method '{config.method}'")


def configure_method(dataset: Dataset, index: IndexFolder, config: RunConfig):
    """The method a run configuration names, built on this index, once the index is known to hold every stage
    it reads: (class, settled options, method, budget)."""
    require_stages(index, config)
    options = config.settled_options()
    method = config.method_class(options, index, dataset.without_judgments())
    return config.method_class, options, method, config.budget


def execute(dataset: Dataset, index: IndexFolder, config: RunConfig, out: str | Path, roles=None, cache=None,
            log=to_stderr) -> dict:
    """Run ``config`` over the dataset into the run folder ``out``, which no other process may write meanwhile."""
    with writer_lock(out, "run folder"):
        return _execute(dataset, index, config, out, roles, cache, log)


def _execute(dataset: Dataset, index: IndexFolder, config: RunConfig, out: str | Path, roles=None,
             cache=None, log=to_stderr) -> dict:
    out = Path(out)
    method_cls, options, method, budget = configure_method(dataset, index, config)
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
    queries = run_queries(dataset, config)  # a shard too many for the queries is refused before anything is written
    simulation = simulation_label(config.models, roles)  # the oracle backend: a run of it must never pass for a model's
    if simulation:
        resolved["simulation"] = simulation
        log(banner(simulation))
    out.mkdir(parents=True, exist_ok=True)
    config_path = out / "config.json"
    resolved = json.loads(json.dumps(resolved))  # as it reads back from disk (tuples become lists)
    trace_path = out / "trace.jsonl"
    done = read_finished(trace_path, "qid")
    saved = json.loads(config_path.read_text()) if config_path.exists() else None
    if done and saved is not None:
        before, now = what_answers(saved), what_answers(resolved)
        if before != now:
            diff = sorted(k for k in set(now) | set(before) if before.get(k) != now.get(k))
            raise GarenError(f"{out}: holds a run with a different configuration ({', '.join(diff)} differ); "
                             "use another --out folder")
    if saved != resolved:  # a folder is pinned by its first finished query: a run that failed before one pins nothing
        write_json(config_path, resolved)

    todo = [q for q in queries if q.id not in done]
    if done:
        log(f"[run] resuming: {len(done)} of {len(queries)} queries already finished")

    wall = 0.0
    if todo:
        if roles is None:
            roles = model_roles(config, dataset, index, cache)
        engines = engine_records(roles, config, log)
        if engines and resolved.get("engines") != engines:  # what the engines started with, beside what was asked
            resolved["engines"] = engines
            write_json(config_path, resolved)
        states = query_states(dataset, index, config, method, budget, todo)
        start = time.perf_counter()
        with open(trace_path, "a", encoding="utf-8") as trace:
            try:
                for record in answer_queries(dataset, index, config, method, states, roles):
                    trace.write(json.dumps(record, ensure_ascii=False) + "\n")
                    trace.flush()
                    os.fsync(trace.fileno())
                    done[record["qid"]] = record
            except KeyboardInterrupt:
                raise GarenError(f"interrupted: {len(done)} of {len(queries)} queries are saved in {trace_path}; "
                                 f"run the same command again to resume") from None
            except GarenError as err:
                raise GarenError(f"{err}\n{len(done)} of {len(queries)} queries are saved in {trace_path}; run the same command again to resume") from None
        wall = time.perf_counter() - start

    return _finish(dataset, config, out, queries, done, wall, len(todo), method_cls, simulation, log)


def run_queries(dataset: Dataset, config: RunConfig) -> list:
    """The judged queries a run answers, in the dataset's order: the first ``limit``, then this shard of them."""
    queries = dataset.judged_queries()[: config.limit] if config.limit else dataset.judged_queries()
    return parse_shard(config.shard).select(queries) if config.shard else queries


def model_roles(config: RunConfig, dataset: Dataset, index: IndexFolder, cache=None):
    """The models a run's method asks for, loaded once: a run builds them for its queries, a Python
    ``Retriever`` for every search it answers."""
    from garen_infer.llm.cache import ResponseCache
    from garen_infer.llm.roles import build_roles

    config.require_models()
    needed = {r: config.models[r] for r in config.roles}
    return build_roles(needed, [d.full_text for d in dataset.documents], index, cache if cache is not None else ResponseCache(),
                       dataset.name, dataset=dataset)


def query_states(dataset: Dataset, index: IndexFolder, config: RunConfig, method, budget, queries,
                 first=None) -> list[QueryState]:
    """Each query with its first-stage ranking (corpus rows, excluded ids dropped unless the method keeps them, as
    RGS's code does). ``first``: the rankings a caller already has (a PyTerrier pipeline's first stage); otherwise
    the configured first stage ranks the index. Either way, documents past its depth score by the configured one."""
    stage = config.first_stage
    if first is None and stage.query == REWRITE:  # each query's text is written as the scheduler runs it
        return [QueryState(q, [], budget, first_stage_kind=stage.kind, first_stage_vectors=stage.vectors)
                for q in queries]
    exclude = None if method.keeps_excluded else [excluded_rows(q, dataset.doc_index) for q in queries]
    texts = [q.text for q in queries]
    if first is None:
        texts = first_stage_texts(queries, stage, dataset.name)
        first = first_stage(index, texts, stage, exclude)
    elif exclude is not None:
        first = [[r for r in rows if r not in drop] for rows, drop in zip(first, exclude)]
    states = [QueryState(q, list(rows), budget, first_stage_kind=stage.kind,
                         first_stage_vectors=stage.vectors, first_stage_text=text)
              for q, rows, text in zip(queries, first, texts)]
    if stage.models_read == "rewritten":
        for state in states:
            state.query = replace(state.query, text=state.first_stage_text)
    return states


def answer_queries(dataset: Dataset, index: IndexFolder, config: RunConfig, method, states: list[QueryState],
                   roles) -> Iterator[dict]:
    """One trace record per query (ranking as document ids, ledger, method diagnostics), each as it finishes.
    Diagnostics that need relevance judgements are added for the queries ``dataset.qrels`` judges."""
    if roles.query_encoder is None:  # the index's own embedding model, for a method that encodes its query (RGS)
        from garen_infer.llm.roles import QueryEncoder

        roles = replace(roles, query_encoder=QueryEncoder(index))
    scheduler = Scheduler(roles, config.max_active_queries, config.max_batch)
    doc_ids, doc_index = index.doc_ids, dataset.doc_index
    stage = config.first_stage
    search = method.search
    if stage.query == REWRITE:
        search = rewrite_then_search(method.search, index, stage, dataset, method.keeps_excluded)
    with tqdm(total=len(states), desc=f"{config.method}", unit="query") as bar:
        for finished in scheduler.run(states, search):
            gold = {doc_index[d] for d, rel in dataset.qrels.get(finished.state.query.id, {}).items() if rel > 0}
            if gold:
                method.diagnose(finished.state, gold)
            for role, kind in finished.state.answer_problems:
                finished.ledger.count_problem(role, kind)
            record = {
                "qid": finished.state.query.id,
                "ranking": [doc_ids[r] for r in finished.ranking],
                "ledger": finished.ledger.summary(),
                "seconds": round(finished.seconds, 4),
                "trace": finished.state.trace,
            }
            if gold and index.has("knn_graph"):  # Fig. 4/8: hops from the first-stage top 20, Hit@100
                record["reach"] = reach(index.knn_graph, finished.state.first_stage, gold, finished.ranking)
            bar.update(1)
            yield record


def scored_rankings(rankings: dict[str, list[str]], dataset: Dataset) -> dict[str, dict[str, float]]:
    """Each ranking as document -> score, strictly decreasing with rank (``run.trec``'s scores), BRIGHT's excluded
    ids removed (``evaluate.remove_excluded``, the one place that happens)."""
    scored = {qid: {d: float(len(ids) - r) for r, d in enumerate(ids)} for qid, ids in rankings.items()}
    return remove_excluded(scored, dataset)


def truncations(ledgers: list[dict]) -> dict:
    """Prompts cut to fit a model's limit over the whole run, in all and per role (ledgers written before the
    count existed read as 0)."""
    roles: dict[str, int] = {}
    for ledger in ledgers:
        for role, cost in ledger.get("roles", {}).items():
            roles[role] = roles.get(role, 0) + cost.get("truncated_prompts", 0)
    return {"truncated_prompts": sum(roles.values()), "truncated_prompts_by_role": {r: n for r, n in roles.items() if n},
            "truncated_tokens": sum(ledger.get("truncated_tokens", 0) for ledger in ledgers)}


def truncation_report(metrics: dict) -> str:
    """The run's one line about cut prompts: a healthy run says 0."""
    n = metrics["truncated_prompts"]
    if not n:
        return "[run] prompts cut to fit a model's limit: 0"
    by_role = ", ".join(f"{role} {count}" for role, count in metrics["truncated_prompts_by_role"].items())
    return (f"[run] prompts cut to fit a model's limit: {n} ({by_role}; {metrics['truncated_tokens']} tokens cut from their "
            "middles); raise max_model_len or max_length in the model spec, or show fewer words per passage")


def answer_problems(ledgers: list[dict]) -> dict:
    """Answers that were not what we asked for over the whole run, by kind, in all and per role, with each role's
    answer count."""
    answers: Counter = Counter()
    by_role: dict[str, Counter] = {}
    for ledger in ledgers:
        for role, cost in ledger.get("roles", {}).items():
            answers[role] += cost.get("requests", 0)
            by_role.setdefault(role, Counter()).update(cost.get("problems", {}))
    by_role = {role: kinds for role, kinds in sorted(by_role.items()) if kinds}
    return {"answer_problems": dict(sorted(sum(by_role.values(), Counter()).items())),
            "answer_problems_by_role": {role: {"answers": answers[role], **dict(sorted(kinds.items()))} for role, kinds in by_role.items()}}


def answer_problems_report(metrics: dict, warn_share: float) -> list[str]:
    """The run's line about answers it could not use as asked (a healthy run says none), then one loud line per
    role whose share of unusable answers is above ``warn_share``."""
    by_role = metrics["answer_problems_by_role"]
    if not by_role:
        return ["[run] answers not used as asked: none"]
    parts = "; ".join(f"{role} " + ", ".join(f"{k} {n}" for k, n in kinds.items() if k != "answers") for role, kinds in by_role.items())
    lines = [f"[run] answers not used as asked: {parts}"]
    for role, kinds in by_role.items():
        unusable = sum(kinds.get(kind, 0) for kind in UNUSABLE)
        if kinds["answers"] and unusable / kinds["answers"] > warn_share:
            lines.append(f"[run] WARNING: {unusable} of the {kinds['answers']} {role} answers ({unusable / kinds['answers']:.0%}) gave "
                         f"nothing usable (more than {warn_share:.0%}); this run's numbers rest on fallbacks, not on the model: "
                         "read its answers in trace.jsonl or the response cache")
    return lines


def _finish(dataset: Dataset, config: RunConfig, out: Path, queries, done: dict, wall: float, fresh: int, method_cls, simulation=None,
            log=to_stderr) -> dict:
    write_trace_in_order(out / "trace.jsonl", [done[q.id] for q in queries])
    engines = json.loads((out / "config.json").read_text()).get("engines")
    return write_results(dataset, config.method, out, queries, done, wall, fresh, method_cls, simulation, config.models, log=log,
                         warn_share=config.unusable_answers_warning, engines=engines)


def write_trace_in_order(path: Path, records: list[dict]) -> None:
    """The finished trace, rewritten in the queries' order (it was appended in the order queries finished), so a
    run's files do not depend on scheduling: the same queries give the same trace, however they were split."""
    lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in records]
    if path.exists() and path.read_text(encoding="utf-8") == "".join(lines):
        return
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        handle.writelines(lines)


def write_results(dataset: Dataset, method: str, out: Path, queries, done: dict, wall: float, fresh: int, method_cls,
                  simulation=None, models=None, label: dict | None = None, log=to_stderr,
                  warn_share: float = RunConfig.unusable_answers_warning, engines: dict | None = None) -> dict:
    """``run.trec`` and ``metrics.json`` from the finished records (``done``: qid -> trace record) of ``queries``;
    ``label`` (a partial merge's) leads metrics.json."""
    rankings = {q.id: done[q.id]["ranking"] for q in queries}
    kept = scored_rankings(rankings, dataset)
    write_run(out / "run.trec", {qid: [d for d in ids if d in kept[qid]] for qid, ids in rankings.items()}, tag=f"{method}.{RUN_TAG}" if simulation else method)
    metrics = {**(label or {}), "dataset": dataset.name, "method": method}
    if simulation:
        metrics = {"simulation": simulation, **metrics}
    if dataset.qrels:
        judged = {q.id for q in queries}
        subset = Dataset(dataset.name, [], [q for q in dataset.queries if q.id in judged], {k: v for k, v in dataset.qrels.items() if k in judged})
        metrics.update(evaluate(kept, subset))
    else:
        metrics["queries"] = len(queries)
    ledgers = [done[q.id]["ledger"] for q in queries]
    n = max(len(ledgers), 1)
    for key in ("budget_used", "requests", "model_calls", "cache_hits", "input_tokens", "output_tokens", "model_seconds"):
        metrics[f"mean_{key}"] = round(sum(ledger[key] for ledger in ledgers) / n, 4)
    metrics.update(truncations(ledgers))
    log(truncation_report(metrics))
    metrics.update(answer_problems(ledgers))
    for line in answer_problems_report(metrics, warn_share):
        log(line)
    metrics["mean_seconds_in_flight"] = round(sum(done[q.id]["seconds"] for q in queries) / n, 4)
    metrics.update(mean_cost(ledgers, prices_for(models or {})))  # Table 7's dollars, for priced models
    by_hops = hit_by_hops([done[q.id].get("reach") for q in queries])
    if by_hops:
        metrics["hit@100_by_min_hops"] = by_hops
    if fresh:
        metrics["wall_seconds_per_query"] = round(wall / fresh, 4)
    metrics.update(method_cls.summarize([done[q.id] for q in queries]))
    if engines:
        metrics["engines"] = engines
    write_json(out / "metrics.json", metrics)
    return metrics
