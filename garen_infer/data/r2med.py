"""R2MED (Li et al., 2025: eight reasoning-driven medical retrieval tasks; GAREN Table 2) through ``datasets``.

Each task is its own hub dataset, ``R2MED/<task>``, whose repository holds ``corpus.jsonl`` (id, text),
``query.jsonl`` (id, text) and ``qrels.jsonl`` (q_id, p_id, score), published as the configurations
``corpus``, ``query`` and ``qrels`` (each a split of the same name). ``source`` is a hub organisation (default
``R2MED``; pin ``revision`` for reproducible numbers) or a local folder with the same three files.
"""

from __future__ import annotations

from pathlib import Path

from garen_infer.data.dataset import Dataset, Document, Query
from garen_infer.errors import DataError

HUB_OWNER = "R2MED"
TASKS = ("Biology", "Bioinformatics", "Medical-Sciences", "MedXpertQA-Exam", "MedQA-Diag", "PMC-Treatment",
         "PMC-Clinical", "IIYi-Clinical")
CONFIGS = ("corpus", "query", "qrels")  # configuration = split = file stem


def task_name(task: str) -> str:
    """The hub's spelling of a task, matched without regard to case (r2med:biology is R2MED/Biology)."""
    for known in TASKS:
        if known.lower() == task.lower():
            return known
    raise DataError("r2med", f"unknown task '{task}'; choose one of {', '.join(TASKS)}")


def source_and_revision(pin: str) -> tuple[str, str | None]:
    """What follows the task in an ``r2med:`` spec: nothing, a local folder, a revision of the R2MED datasets, or
    ``<owner>@<revision>``."""
    if not pin:
        return HUB_OWNER, None
    owner, _, revision = pin.partition("@")
    if revision:
        return owner, revision
    return (pin, None) if Path(pin).is_dir() else (HUB_OWNER, pin)


def _load_rows(source: str, task: str, config: str, revision: str | None):
    import datasets

    local = Path(source)
    if local.is_dir():
        if revision:
            raise DataError(local, f"a local copy has one version; revision '{revision}' pins a hub dataset")
        path = local / f"{config}.jsonl"
        if not path.is_file():
            raise DataError(path,
                            f"file not found (a local R2MED copy holds {', '.join(c + '.jsonl' for c in CONFIGS)})")
        return datasets.load_dataset("json", data_files=str(path), split="train")
    return datasets.load_dataset(f"{source}/{task}", config, split=config, revision=revision)


def _id(row: dict, key: str) -> str:
    return "" if row.get(key) is None else str(row[key])  # ids may be stored as numbers


def load_r2med(task: str, *, source: str = HUB_OWNER, revision: str | None = None,
               documents: bool = True) -> Dataset:
    """An R2MED task; without ``documents`` its corpus is not read, nor the judged ids checked against it."""
    task = task_name(task)
    origin = f"{source}:{task}"
    docs, seen = [], set()
    for row_no, row in enumerate(_load_rows(source, task, "corpus", revision) if documents else (), start=1):
        doc_id, text = _id(row, "id"), row.get("text")
        if not doc_id or not isinstance(text, str):
            raise DataError(f"{origin} corpus", "missing id or text", row_no)
        if doc_id in seen:
            raise DataError(f"{origin} corpus", f"duplicate document id '{doc_id}'", row_no, "id")
        seen.add(doc_id)
        docs.append(Document(doc_id, text.strip()))
    queries = []
    for row_no, row in enumerate(_load_rows(source, task, "query", revision), start=1):
        qid, text = _id(row, "id"), row.get("text")
        if not qid or not isinstance(text, str) or not text.strip():
            raise DataError(f"{origin} query", "missing id or text", row_no)
        queries.append(Query(qid, text.strip()))
    known_queries = {q.id for q in queries}
    qrels: dict[str, dict[str, int]] = {}
    for row_no, row in enumerate(_load_rows(source, task, "qrels", revision), start=1):
        qid, doc_id, score = _id(row, "q_id"), _id(row, "p_id"), row.get("score")
        if qid not in known_queries:
            raise DataError(f"{origin} qrels", f"query '{qid}' is not in the queries", row_no, "q_id")
        if documents and doc_id not in seen:
            raise DataError(f"{origin} qrels", f"document '{doc_id}' is not in the corpus", row_no, "p_id")
        if not isinstance(score, (int, float)):
            raise DataError(f"{origin} qrels", "the score is not a number", row_no, "score")
        qrels.setdefault(qid, {})[doc_id] = int(score)
    return Dataset(f"r2med/{task}", docs, queries, qrels)
