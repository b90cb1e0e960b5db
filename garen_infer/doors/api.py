"""The Python API: ``Index`` and ``Retriever``, the same engine as ``garen-infer index`` and ``garen-infer run``.

    import garen_infer as gi
    index = gi.Index.build("beir:data/scifact:test", "idx/scifact", preset="cpu-default")
    r = gi.Retriever(index, method="garen", budget=100, overrides={"methods.garen.tau_switch": 2})
    r.search({"q1": "why do ..."})      # DataFrame[qid, docno, rank, score]; r.ledger: what each query cost

A preset and its overrides become one checked run configuration (``config.run_config_from``) exactly as the
CLI's do, the response cache is the CLI's, and a query searched here gets the ranking ``garen-infer run`` gives
it. Frames follow PyTerrier's conventions: ``qid``/``docno`` strings, ``rank`` from 0, scores strictly decreasing
(``run.trec``'s scores: the method's own where it has them, BM25's, the dense inner product, a pointwise
reranker's P(yes), a given frame's own for ``bm25`` over it; ``n - rank`` for a listwise order).
Every refusal is a ``GarenError`` carrying the CLI's one line.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from garen_infer.configuration.presets import DEFAULT_PRESET, load_preset, run_config_from
from garen_infer.data.dataset import Dataset, Query
from garen_infer.errors import GarenError, storage_refusal
from garen_infer.running.session import Session
from garen_infer.settings import Count

RESULT_COLUMNS = ["qid", "docno", "rank", "score"]
LEDGER_COLUMNS = ["qid", "budget_used", "budget", "requests", "model_calls", "cache_hits", "input_tokens",
                  "output_tokens",
                  "model_seconds", "seconds"]


def refusals_as_garen_errors(function):
    """The API's calls raise the CLI's refusals: a ``GarenError`` (or a storage failure turned into one) re-raised
    from the call the user made, without the frames of the layers below it."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except GarenError as err:
            raise err.with_traceback(None) from None
        except OSError as err:
            refusal = storage_refusal(err)
            if refusal is None:
                raise
            raise refusal from None

    return call


def _dataset(dataset: Dataset | str | Path, allow_empty_docs: bool) -> Dataset:
    if isinstance(dataset, Dataset):
        return dataset
    if isinstance(dataset, (str, Path)):
        from garen_infer.data import load_dataset

        try:
            return load_dataset(str(dataset), allow_empty_docs)
        except GarenError as err:  # the loaders name the CLI's flag; from Python it is the argument
            if "--allow-empty-docs" not in str(err):
                raise
            raise GarenError(str(err).replace("pass --allow-empty-docs", "pass allow_empty_docs=True")) from None
    raise GarenError("dataset: expected a spec such as 'beir:data/scifact:test' or a Dataset, got "
                     f"{type(dataset).__name__}")


class Index:
    """An index folder with the dataset it was built for (its documents are what the methods read)."""

    def __init__(self, folder, dataset: Dataset):
        self.folder, self.dataset = folder, dataset

    @classmethod
    @refusals_as_garen_errors
    def build(cls, dataset: Dataset | str | Path, out: str | Path, preset: str = DEFAULT_PRESET,
              overrides=None, force: bool = False, allow_empty_docs: bool = False, log=print) -> Index:
        """Build (or complete) the index folder ``out`` with the preset's stages, as ``garen-infer index`` does.
        ``dataset``: a spec (``beir:``, ``bright:``, ``jsonl:``, ``irds:``) or a loaded ``Dataset``."""
        from garen_infer.index.folder import IndexFolder
        from garen_infer.index.stages import IndexConfig

        settings = load_preset(preset, overrides or {})
        data = _dataset(dataset, allow_empty_docs)
        return cls(IndexFolder.build(data, out, IndexConfig.from_dict(settings.get("index", {})), force=force,
                                     log=log), data)

    @classmethod
    @refusals_as_garen_errors
    def open(cls, folder: str | Path, dataset: Dataset | str | Path,
             allow_empty_docs: bool = False) -> Index:
        """An index folder already built, checked against ``dataset`` (an index of another corpus is refused)."""
        from garen_infer.index.folder import IndexFolder

        data = _dataset(dataset, allow_empty_docs)
        return cls(IndexFolder.open(folder, data), data)

    @property
    def path(self) -> Path:
        return self.folder.path

    @property
    def stages(self) -> list[str]:
        return list(self.folder.manifest["stages"])

    def require_folder(self) -> None:
        """Refuse in one line an index whose folder was deleted or moved since it was opened: its stages' files are
        read as methods need them, so a missing one would otherwise surface deep inside a search."""
        if not (self.path / "manifest.json").is_file():
            raise GarenError(f"{self.path}: the index folder is gone (deleted or moved since Index.open); build it or "
                             f"open it again where it is now")

    def topics(self):
        """The dataset's judged queries as a frame ``qid, query`` (PyTerrier's topics)."""
        import pandas as pd

        return pd.DataFrame([(q.id, q.text) for q in self.dataset.judged_queries()], columns=["qid", "query"])

    def qrels(self):
        """The relevance judgements as a frame ``qid, docno, label`` (PyTerrier's qrels)."""
        import pandas as pd

        rows = [(qid, docno, label) for qid, docs in self.dataset.qrels.items() for docno, label in docs.items()]
        return pd.DataFrame(rows, columns=["qid", "docno", "label"])

    def __repr__(self) -> str:
        return f"Index({str(self.path)!r}, dataset={self.dataset.name!r}, stages={self.stages})"


@dataclass
class RetrieverCounts:
    """The counts a ``Retriever`` takes, checked as ``--budget`` and ``--max-active-queries`` are."""

    budget: Count | None = None
    max_active_queries: Count | None = None


class Retriever:
    """One method with its settings over an ``Index``. Its models load at the first search and stay loaded.

    ``overrides``: preset fields by dotted key, ``{"methods.garen.tau_switch": 2}`` (``--set``'s keys). ``cache``:
    None for the default response cache (the CLI's), a path for another, False for none."""

    @refusals_as_garen_errors
    def __init__(self, index: Index, method: str, budget: int | None = None, preset: str = DEFAULT_PRESET,
                 overrides=None, cache=None, max_active_queries: int | None = None):
        from garen_infer.settings import validate

        if not isinstance(index, Index):
            raise GarenError("index: expected a garen_infer.Index (Index.open or Index.build), got "
                             f"{type(index).__name__}")
        given = {"budget": budget, "max_active_queries": max_active_queries}
        validate(RetrieverCounts, {k: v for k, v in given.items() if v is not None}, "Retriever")
        self.index, self.method = index, method
        self.config = run_config_from(load_preset(preset, overrides or {}), method, budget,
                                      max_active=max_active_queries)
        self.cache = _cache(cache)
        self.session = Session(index.dataset, index.folder, self.config, self.cache)
        self.ledger = _frame([], LEDGER_COLUMNS)

    @refusals_as_garen_errors
    def search(self, queries):
        """Rank the corpus for ``queries`` ({qid: text} or a frame with ``qid, query``) from the configured first
        stage: ``DataFrame[qid, docno, rank, score]``, the rankings ``garen-infer run`` writes for them."""
        return self._answer(_queries(queries, self.index.dataset), None)

    @refusals_as_garen_errors
    def rerank(self, results):
        """Run the method from a first-stage result frame (``qid, query, docno`` and ``rank`` or ``score``, e.g. any
        PyTerrier retriever's output) instead of the configured first stage. Documents the frame does not list
        score as the configured first stage scores them. A method that returns the frame's order (``bm25``)
        returns its scores too (score kind ``given``); the methods that rerank, their reranker's."""
        queries, first = _first_stage_frame(results, self.index)
        return self._answer(queries, first)

    @refusals_as_garen_errors
    def run(self, out: str | Path, limit: int | None = None) -> dict:
        """``garen-infer run``: every judged query of the index's dataset into the resumable run folder ``out``
        (run.trec, metrics.json, trace.jsonl); returns the metrics."""
        self.index.require_folder()
        self.session.models()
        return (self.session if limit is None else self.session.limited(limit)).run(out)

    def _answer(self, queries: list[Query], first):
        self.index.require_folder()
        found = self.session.search(queries, first)
        self.ledger = _frame([[q.id, *(found.records[q.id]["ledger"][k] for k in LEDGER_COLUMNS[1:-1]),
                               found.records[q.id]["seconds"]] for q in queries], LEDGER_COLUMNS)
        return _frame(found.ranked_rows(), RESULT_COLUMNS)

    def __repr__(self) -> str:
        return f"Retriever(method={self.method!r}, budget={self.config.budget!r}, index={str(self.index.path)!r})"


def _cache(cache):
    from garen_infer.llm.cache import NoCache, ResponseCache

    if cache is False:
        return NoCache()
    if cache is None or isinstance(cache, (str, Path)):
        return ResponseCache(cache)
    if hasattr(cache, "get_many") and hasattr(cache, "put_many"):
        return cache
    raise GarenError(f"cache: expected None (the default cache), a file path or False (no cache), got {cache!r}")


def _frame(rows, columns):
    import pandas as pd

    return pd.DataFrame(rows, columns=columns)


def _queries(queries, dataset: Dataset) -> list[Query]:
    """Queries from {qid: text} or a frame with ``qid`` and ``query``. A query that is one of the dataset's (same id,
    same text) keeps the ids the dataset excludes for it (BRIGHT), so its ranking is the one a run gives."""
    if isinstance(queries, dict):
        pairs = list(queries.items())
        where = "queries"
    elif hasattr(queries, "columns"):
        missing = [c for c in ("qid", "query") if c not in queries.columns]
        if missing:
            raise GarenError(f"queries: the frame has no column {', '.join(repr(c) for c in missing)} (it has "
                             f"{', '.join(map(str, queries.columns))}); expected qid and query")
        pairs = list(zip(queries["qid"], queries["query"]))
        where = "queries frame"
    else:
        raise GarenError("queries: expected {qid: text} or a DataFrame with columns qid and query, got "
                         f"{type(queries).__name__}")
    known = {q.id: q for q in dataset.queries}
    out, seen = [], set()
    for qid, text in pairs:
        qid = str(qid)
        if qid in seen:
            raise GarenError(f"{where}: query id '{qid}' appears twice")
        if not isinstance(text, str) or not text.strip():
            raise GarenError(f"{where}: query '{qid}' has no text (expected a non-empty string, got {text!r})")
        seen.add(qid)
        same = known.get(qid)
        out.append(same if same is not None and same.text == text else Query(qid, text))
    if not out:
        raise GarenError(f"{where}: no queries to search")
    return out


def _first_stage_frame(results, index: Index) -> tuple[list[Query], list]:
    """Queries and their first-stage rankings from a result frame: corpus rows best first, or row -> score in
    that order where the frame has scores."""
    import pandas as pd

    if not hasattr(results, "columns"):
        raise GarenError("results: expected a DataFrame with columns qid, query, docno and rank or score, "
                         f"got {type(results).__name__}")
    missing = [c for c in ("qid", "query", "docno") if c not in results.columns]
    order = "rank" if "rank" in results.columns else "score" if "score" in results.columns else None
    if missing or order is None:
        missing += [] if order else ["rank or score"]
        raise GarenError(
            f"results: the frame lacks {', '.join(missing)} (it has {', '.join(map(str, results.columns))}); "
            f"expected a first-stage result frame: qid, query, docno and rank or score"
        )
    row_of = index.folder.row_of_id
    frame = results.assign(qid=results["qid"].astype(str), docno=results["docno"].astype(str))
    frame = frame.sort_values(["qid", order], ascending=[True, order == "rank"], kind="stable")
    queries = _queries(frame.drop_duplicates("qid")[["qid", "query"]], index.dataset)
    first: list[list[int] | dict[int, float]] = []  # rows best first, or row -> score in that order
    for (qid, group), _query in zip(frame.groupby("qid", sort=True), queries):
        unknown = next((d for d in group["docno"] if d not in row_of), None)
        if unknown is not None:
            raise GarenError(f"results: document '{unknown}' of query '{qid}' is not in the corpus of {index.path} "
                             f"({index.dataset.name})")
        rows = [row_of[d] for d in group["docno"]]
        if "score" in group.columns:  # its scores go with its order (a score that is no number: none)
            given: dict[int, float] = {}
            for row, score in zip(rows, pd.to_numeric(group["score"], errors="coerce")):
                given.setdefault(row, float(score))
            first.append(given)
        else:
            first.append(list(dict.fromkeys(rows)))
    return queries, first
