"""The pieces of a run, each query from its first stage to its trace record: the method a configuration names,
built on an index; the queries it answers; the models it asks; each query's first-stage ranking; the scheduler's
finished queries as trace records. ``session.Session`` puts them together for every door."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import asdict, fields, replace
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from garen_infer.configuration.run_config import RunConfig
from garen_infer.configuration.shards import parse_shard
from garen_infer.data.dataset import Dataset
from garen_infer.errors import GarenError
from garen_infer.evaluation.reachability import reach
from garen_infer.index.first_stage import (
    REWRITE,
    FirstStageConfig,
    excluded_rows,
    first_stage_scored,
    first_stage_texts,
)
from garen_infer.llm.model_specs import spec_identity
from garen_infer.methods.base import PSEUDO, QueryState
from garen_infer.running.query_rewrite import rewrite_then_search
from garen_infer.running.scheduler import Scheduler
from garen_infer.storage.trec import as_written

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


def run_queries(dataset: Dataset, config: RunConfig) -> list:
    """The judged queries a run answers, in the dataset's order: the first ``limit``, then this shard of them. A
    dataset without any is refused: a run of nothing would write an empty run.trec that reads as a result."""
    queries = dataset.judged_queries()[: config.limit] if config.limit else dataset.judged_queries()
    if not queries:
        raise GarenError(f"dataset '{dataset.name}' has no queries to run (none given, or none judged); give "
                         f"it queries, e.g. jsonl:<corpus>,<queries>[,<qrels>]")
    return parse_shard(config.shard).select(queries) if config.shard else queries


def model_roles(config: RunConfig, dataset: Dataset, index: IndexFolder, cache=None):
    """The models a run's method asks for, loaded once: a run builds them for its queries, a Python
    ``Retriever`` for every search it answers."""
    from garen_infer.llm.cache import ResponseCache
    from garen_infer.llm.roles import build_roles

    config.require_models()
    needed = {r: config.models[r] for r in config.roles}
    return build_roles(needed, [d.full_text for d in dataset.documents], index,
                       cache if cache is not None else ResponseCache(),
                       dataset.name, dataset=dataset)


GIVEN = "given"  # the score kind of a first stage a caller gives with its scores


def query_states(dataset: Dataset, index: IndexFolder, config: RunConfig, method, budget, queries,
                 first=None) -> list[QueryState]:
    """Each query with its first-stage ranking (corpus rows, excluded ids dropped unless the method keeps them, as
    RGS's code does). ``first``: the rankings a caller already has (a PyTerrier pipeline's first stage: rows,
    or row -> score in rank order, its scores then the ranking's where a method returns that order: kind
    "given"); otherwise the configured first stage ranks the index. Either way, documents past its depth
    score by the configured one."""
    stage = config.first_stage
    if first is None and stage.query == REWRITE:  # each query's text is written as the scheduler runs it
        return [QueryState(q, [], budget, first_stage_kind=stage.kind, first_stage_vectors=stage.vectors)
                for q in queries]
    exclude = None if method.keeps_excluded else [excluded_rows(q, dataset.doc_index) for q in queries]
    texts = [q.text for q in queries]
    scored_by: str = stage.kind
    if first is None:
        texts = first_stage_texts(queries, stage, dataset.name)
        hits = first_stage_scored(index, texts, stage, exclude)
        first, scores = [[row for row, _ in h] for h in hits], [dict(h) for h in hits]
    else:  # rows a caller gives carry the scores it gives, if any
        scored_by, scores = GIVEN, [dict(rows) if isinstance(rows, dict) else {} for rows in first]
        first = [list(rows) for rows in first]
        if exclude is not None:
            first = [[r for r in rows if r not in drop] for rows, drop in zip(first, exclude)]
    states = [QueryState(q, list(rows), budget, first_stage_kind=stage.kind,
                         first_stage_vectors=stage.vectors, first_stage_text=text, first_stage_scores=score,
                         first_stage_scored_by=scored_by)
              for q, rows, text, score in zip(queries, first, texts, scores)]
    if stage.models_read == "rewritten":
        for state in states:
            assert state.first_stage_text is not None  # set from texts above
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
            kind, scores = method.ranking_scores(finished.state, finished.ranking)
            record = {
                "qid": finished.state.query.id,
                "ranking": [doc_ids[r] for r in finished.ranking],
                "score_kind": kind,  # what run.trec's scores are (results.py)
                "ledger": finished.ledger.summary(),
                "seconds": round(finished.seconds, 4),
                "trace": finished.state.trace,
            }
            if kind != PSEUDO:  # each ranked document's own score, None where it has none
                record["scores"] = [as_written(score) for score in scores]
            if gold and index.has("knn_graph"):  # Fig. 4/8: hops from the first-stage top 20, Hit@100
                record["reach"] = reach(index.knn_graph, finished.state.first_stage, gold, finished.ranking)
            bar.update(1)
            yield record
