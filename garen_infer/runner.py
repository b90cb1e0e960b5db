"""A run: one method over a dataset's queries, written to a run folder that survives interruption.

Run folder: ``config.json`` (the resolved configuration), ``trace.jsonl`` (one line per finished query:
ranking, ledger, method diagnostics; appended and flushed as each query finishes), then ``run.trec`` and
``metrics.json`` (written atomically once every query is done). Started again, a run skips the queries already
in ``trace.jsonl``; a configuration that differs from the saved one is refused rather than mixed in.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from garen_infer.append_log import read_finished
from garen_infer.costs import mean_cost, prices_for
from garen_infer.data.dataset import Dataset
from garen_infer.errors import GarenError
from garen_infer.evaluate import evaluate, remove_excluded
from garen_infer.first_stage import FirstStageConfig, excluded_rows, first_stage
from garen_infer.index.atomic import write_json
from garen_infer.llm.oracle import RUN_TAG, banner, simulation_label
from garen_infer.methods.base import QueryState, get_method, make_config
from garen_infer.reachability import hit_by_hops, reach
from garen_infer.scheduler import Scheduler
from garen_infer.settings import Count
from garen_infer.writer_lock import writer_lock
from garen_infer.trec import write_run


def to_stderr(line: str) -> None:
    """Where a run's messages go by default: stdout is the metrics' (``garen-infer run`` prints them as JSON)."""
    print(line, file=sys.stderr)


@dataclass
class RunConfig:
    method: str
    method_options: dict = field(default_factory=dict)
    budget: Count | None = None
    first_stage: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)
    max_active_queries: Count = 16  # queries in flight at once; 1 = strictly one at a time
    max_batch: Count = 64  # items per backend call
    limit: Count | None = None  # first N judged queries only (smoke runs)

    def method_config(self):
        """The method's options with ``budget`` applied, each checked against its field (one line if not)."""
        method_cls = get_method(self.method)
        options = dict(self.method_options)
        if self.budget is not None and "budget" in method_cls.Config.__dataclass_fields__:
            options["budget"] = self.budget
        return make_config(method_cls, options)


def first_stage_stage(config: RunConfig) -> str:
    return "embeddings" if FirstStageConfig(**config.first_stage).kind == "dense" else "bm25"


def configure_method(dataset: Dataset, index, config: RunConfig):
    """The method a run configuration names, built on this index: (class, options, method, budget). Refuses
    unknown options and an index that lacks a stage the method reads (``garen-infer bench`` plans with this)."""
    method_cls = get_method(config.method)
    options_dict = dict(config.method_options)
    takes_budget = "budget" in method_cls.Config.__dataclass_fields__
    if config.budget is not None and takes_budget:
        options_dict["budget"] = config.budget  # --budget overrides the preset
    options = method_cls.settle(make_config(method_cls, options_dict), config.models)
    budget = options.budget if takes_budget else None
    method = method_cls(options, index, dataset.without_judgments())  # its options may change its stages and roles
    for stage in dict.fromkeys([first_stage_stage(config), *method.index_stages]):  # every run starts from the first stage
        index.require(stage, f"method '{config.method}'")
    return method_cls, options, method, budget


def execute(dataset: Dataset, index, config: RunConfig, out: str | Path, roles=None, cache=None, log=to_stderr) -> dict:
    """Run ``config`` over the dataset into the run folder ``out``, which no other process may write meanwhile."""
    with writer_lock(out, "run folder"):
        return _execute(dataset, index, config, out, roles, cache, log)


def _execute(dataset: Dataset, index, config: RunConfig, out: str | Path, roles=None, cache=None, log=to_stderr) -> dict:
    out = Path(out)
    method_cls, options, method, budget = configure_method(dataset, index, config)
    resolved = {
        "dataset": dataset.name, "corpus_fingerprint": dataset.fingerprint(), "index": str(index.path),
        # a stage rebuilt with other params between an interruption and a resume must not be mixed in
        "index_stages": {s: index.manifest["stages"][s]["params"] for s in sorted(set(method.index_stages) | {first_stage_stage(config)}) if index.has(s)},
        "method": config.method, "method_options": asdict(options), "budget": budget,
        "first_stage": asdict(FirstStageConfig(**config.first_stage)), "models": config.models,
        "limit": config.limit,
    }
    simulation = simulation_label(config.models, roles)  # the oracle backend: a run of it must never pass for a model's
    if simulation:
        resolved["simulation"] = simulation
        log(banner(simulation))
    out.mkdir(parents=True, exist_ok=True)
    config_path = out / "config.json"
    resolved = json.loads(json.dumps(resolved))  # as it reads back from disk (tuples become lists)
    if config_path.exists():
        saved = json.loads(config_path.read_text())
        if saved != resolved:
            diff = sorted(k for k in resolved if saved.get(k) != resolved.get(k))
            raise GarenError(f"{out}: holds a run with a different configuration ({', '.join(diff)} differ); use another --out folder")
    else:
        write_json(config_path, resolved)

    queries = dataset.judged_queries()[: config.limit] if config.limit else dataset.judged_queries()
    trace_path = out / "trace.jsonl"
    done = read_finished(trace_path, "qid")
    todo = [q for q in queries if q.id not in done]
    if done:
        log(f"[run] resuming: {len(done)} of {len(queries)} queries already finished")

    wall = 0.0
    if todo:
        if roles is None:
            from garen_infer.llm.cache import ResponseCache
            from garen_infer.llm.roles import build_roles

            needed = {r: config.models[r] for r in method.roles if r in config.models}
            missing = [r for r in method.roles if r not in config.models]
            if missing:
                raise GarenError(f"method '{config.method}' needs model(s) for {', '.join(missing)}; add them under 'models:' in the preset")
            roles = build_roles(needed, [d.full_text for d in dataset.documents], index, cache if cache is not None else ResponseCache(), dataset.name,
                                dataset=dataset)
        # excluded ids leave the first stage before any method sees it, unless the method keeps them (RGS's code)
        exclude = None if method.keeps_excluded else [excluded_rows(q, dataset.doc_index) for q in todo]
        first = first_stage(index, [q.text for q in todo], FirstStageConfig(**config.first_stage), exclude)
        kind = FirstStageConfig(**config.first_stage).kind
        states = [QueryState(q, rows, budget, first_stage_kind=kind) for q, rows in zip(todo, first)]
        scheduler = Scheduler(roles, config.max_active_queries, config.max_batch)
        doc_ids = index.doc_ids
        start = time.perf_counter()
        with open(trace_path, "a", encoding="utf-8") as trace, tqdm(total=len(todo), desc=f"{config.method}", unit="query") as bar:
            try:
                doc_index = dataset.doc_index
                for finished in scheduler.run(states, method.search):
                    gold = {doc_index[d] for d, rel in dataset.qrels.get(finished.state.query.id, {}).items() if rel > 0}
                    if gold:
                        method.diagnose(finished.state, gold)
                    record = {
                        "qid": finished.state.query.id,
                        "ranking": [doc_ids[r] for r in finished.ranking],
                        "ledger": finished.ledger.summary(),
                        "seconds": round(finished.seconds, 4),
                        "trace": finished.state.trace,
                    }
                    if gold and index.has("knn_graph"):  # Fig. 4/8: hops from the first-stage top 20, Hit@100
                        record["reach"] = reach(index.knn_graph, finished.state.first_stage, gold, finished.ranking)
                    trace.write(json.dumps(record, ensure_ascii=False) + "\n")
                    trace.flush()
                    os.fsync(trace.fileno())
                    done[record["qid"]] = record
                    bar.update(1)
            except KeyboardInterrupt:
                raise GarenError(f"interrupted: {len(done)} of {len(queries)} queries are saved in {trace_path}; run the same command again to resume") from None
            except GarenError as err:
                raise GarenError(f"{err}\n{len(done)} of {len(queries)} queries are saved in {trace_path}; run the same command again to resume") from None
        wall = time.perf_counter() - start

    return _finish(dataset, config, out, queries, done, wall, len(todo), method_cls, simulation, log)


def truncations(ledgers: list[dict]) -> dict:
    """Prompts cut to fit a model's limit over the whole run, in all and per role (ledgers written before the
    count existed read as 0)."""
    roles: dict[str, int] = {}
    for ledger in ledgers:
        for role, cost in ledger.get("roles", {}).items():
            roles[role] = roles.get(role, 0) + cost.get("truncated_prompts", 0)
    return {"truncated_prompts": sum(roles.values()), "truncated_prompts_by_role": {r: n for r, n in roles.items() if n},
            "truncated_tokens": sum(l.get("truncated_tokens", 0) for l in ledgers)}


def truncation_report(metrics: dict) -> str:
    """The run's one line about cut prompts: a healthy run says 0."""
    n = metrics["truncated_prompts"]
    if not n:
        return "[run] prompts cut to fit a model's limit: 0"
    by_role = ", ".join(f"{role} {count}" for role, count in metrics["truncated_prompts_by_role"].items())
    return (f"[run] prompts cut to fit a model's limit: {n} ({by_role}; {metrics['truncated_tokens']} tokens cut from their "
            "middles); raise max_model_len or max_length in the model spec, or show fewer words per passage")


def _finish(dataset: Dataset, config: RunConfig, out: Path, queries, done: dict, wall: float, fresh: int, method_cls, simulation=None,
            log=to_stderr) -> dict:
    rankings = {q.id: done[q.id]["ranking"] for q in queries}
    scored = {qid: {d: float(len(ids) - r) for r, d in enumerate(ids)} for qid, ids in rankings.items()}
    kept = remove_excluded(scored, dataset)
    write_run(out / "run.trec", {qid: [d for d in ids if d in kept[qid]] for qid, ids in rankings.items()}, tag=f"{config.method}.{RUN_TAG}" if simulation else config.method)
    metrics = {"dataset": dataset.name, "method": config.method}
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
        metrics[f"mean_{key}"] = round(sum(l[key] for l in ledgers) / n, 4)
    metrics.update(truncations(ledgers))
    log(truncation_report(metrics))
    metrics["mean_seconds_in_flight"] = round(sum(done[q.id]["seconds"] for q in queries) / n, 4)
    metrics.update(mean_cost(ledgers, prices_for(config.models)))  # Table 7's dollars, for priced models
    by_hops = hit_by_hops([done[q.id].get("reach") for q in queries])
    if by_hops:
        metrics["hit@100_by_min_hops"] = by_hops
    if fresh:
        metrics["wall_seconds_per_query"] = round(wall / fresh, 4)
    metrics.update(method_cls.summarize([done[q.id] for q in queries]))
    write_json(out / "metrics.json", metrics)
    return metrics
