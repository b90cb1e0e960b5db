"""BRIGHT (Su et al., ICLR 2025) through the ``datasets`` library.

Configs used: ``documents`` (id, content) or ``long_documents``, and ``examples`` (id, query, gold_ids,
gold_ids_long, excluded_ids); one split per task (biology, ..., theoremqa_theorems). ``source`` is the hub
name (pin ``revision`` for reproducible numbers: the data set has changed between paper versions) or a local
folder with the same layout as the hub repository: ``<config>/<task>-*.parquet``.
"""

from __future__ import annotations

from pathlib import Path

from garen_infer.data.dataset import Dataset, Document, Query
from garen_infer.errors import DataError

HUB_NAME = "xlangai/BRIGHT"
TASKS = (
    "biology", "earth_science", "economics", "psychology", "robotics", "stackoverflow", "sustainable_living",
    "leetcode", "pony", "aops", "theoremqa_questions", "theoremqa_theorems",
)
NOT_AN_ID = "N/A"  # StackExchange tasks list this sentinel as their only excluded id


def source_and_revision(pin: str) -> tuple[str, str | None]:
    """What follows the first '@' of a ``bright:`` spec: ``<source>@<revision>``, a source alone (a hub name
    'owner/name' or a local folder), or a revision alone (of the default hub dataset, e.g. a commit hash)."""
    if not pin:
        return HUB_NAME, None
    source, _, revision = pin.partition("@")
    if revision:
        return source, revision
    if "/" in pin or Path(pin).is_dir():
        return pin, None
    return HUB_NAME, pin


def _load_split(source: str, config: str, task: str, revision: str | None):
    import datasets

    local = Path(source)
    if local.is_dir():
        if revision:
            raise DataError(local,
                            f"a local copy has one version; revision '{revision}' pins a hub dataset (drop "
                            f"'@{revision}', or name the hub dataset)")
        files = sorted(str(p) for p in (local / config).glob(f"{task}-*.parquet"))
        if not files:
            raise DataError(local / config, f"no parquet file for task '{task}' (expected {task}-*.parquet)")
        return datasets.load_dataset("parquet", data_files=files, split="train")
    try:
        return datasets.load_dataset(source, config, split=task, revision=revision)
    except OSError as err:  # the hub unreachable (ConnectionError), offline without a cached copy, or no such dataset
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        raise DataError(f"bright:{task}",
                        f"cannot load {source} ({config}) from the Hugging Face hub: {reason}; check the "
                        "network (HF_HUB_OFFLINE=1 reads only cached copies), or name a local copy: "
                        f"bright:{task}@<folder>") from None


def bright_from_records(task: str, documents, examples, *, long_documents: bool, origin: str) -> Dataset:
    """Turn BRIGHT rows (any iterable of dicts) into a validated Dataset; with ``documents`` None, one without
    documents whose gold ids are not checked against them (what scoring a run needs)."""
    docs: list[Document] = []
    seen: dict[str, int] = {}
    for row_no, row in enumerate(documents or (), start=1):
        doc_id, content = row.get("id"), row.get("content")
        if not isinstance(doc_id, str) or not doc_id:
            raise DataError(origin, "missing or empty document id", row_no, "id")
        if doc_id in seen:
            raise DataError(origin, f"duplicate document id '{doc_id}' (first at row {seen[doc_id]})", row_no, "id")
        if not isinstance(content, str):
            raise DataError(origin, "missing document content", row_no, "content")
        seen[doc_id] = row_no
        docs.append(Document(doc_id, content))
    gold_key = "gold_ids_long" if long_documents else "gold_ids"
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    for row_no, row in enumerate(examples, start=1):
        qid, text = str(row.get("id", "")), row.get("query")
        if not qid or not isinstance(text, str) or not text.strip():
            raise DataError(origin, "missing id or query", row_no, "query")
        excluded = frozenset(i for i in (row.get("excluded_ids") or []) if i != NOT_AN_ID)
        for gold in row.get(gold_key) or []:
            if documents is not None and gold not in seen:
                raise DataError(origin, f"gold id '{gold}' is not in the {task} documents", row_no, gold_key)
            if gold in excluded:
                raise DataError(origin, f"gold id '{gold}' is also excluded", row_no, "excluded_ids")
            qrels.setdefault(qid, {})[gold] = 1
        queries.append(Query(qid, text, excluded))
    suffix = ":long" if long_documents else ""
    return Dataset(f"bright/{task}{suffix}", docs, queries, qrels)


def load_bright(task: str, *, long_documents: bool = False, source: str = HUB_NAME,
                revision: str | None = None, documents: bool = True) -> Dataset:
    """A BRIGHT task; without ``documents`` only its examples are read (queries, gold and excluded ids)."""
    if task not in TASKS:
        raise DataError("bright", f"unknown task '{task}'; choose one of {', '.join(TASKS)}")
    doc_config = "long_documents" if long_documents else "documents"
    rows = _load_split(source, doc_config, task, revision) if documents else None
    examples = _load_split(source, "examples", task, revision)
    return bright_from_records(task, rows, examples, long_documents=long_documents, origin=f"{source}:{task}")


# BRIGHT publishes each example rewritten by an LLM's reasoning, one configuration per model (`<model>_reason`,
# split by task, the examples' ids). BRIGHT's run.py `--reasoning <model>` retrieves with that configuration's
# `query` field, which is what a first stage reads here (first_stage.query: bright:<model>).
REASONING_MODELS = ("gpt4", "claude-3-opus", "Gemini-1.0", "llama3-70b", "grit")


def load_reasoning_queries(
    task: str, model: str, *, source: str = HUB_NAME, revision: str | None = None
) -> dict[str, str]:
    """Query id -> the text BRIGHT's `<model>_reason` configuration gives for ``task``."""
    if model not in REASONING_MODELS:
        raise DataError("bright", f"no reasoning queries by '{model}'; BRIGHT publishes {', '.join(REASONING_MODELS)}")
    if task not in TASKS:
        raise DataError("bright", f"unknown task '{task}'; choose one of {', '.join(TASKS)}")
    texts = {}
    for row_no, row in enumerate(_load_split(source, f"{model}_reason", task, revision), start=1):
        qid, text = str(row.get("id", "")), row.get("query")
        if not qid or not isinstance(text, str) or not text.strip():
            raise DataError(f"{source}:{model}_reason:{task}", "missing id or query", row_no, "query")
        texts[qid] = text
    return texts
