"""Collections that ir_datasets knows, by id (``irds:beir/scifact/test``, ``irds:cranfield``, ``irds:bright/biology``).

ir_datasets finds (or fetches) the files itself, under ``$IR_DATASETS_HOME`` (default ``~/.ir_datasets``): a copy
placed there in its layout, or a dataset registered with ``ir_datasets.registry.register``, loads offline.
Documents keep ``title`` and ``text`` where the collection has both (BEIR), otherwise the record's
``default_text()``. Judgements that the collection's ``qrels_defs`` call excluded (BRIGHT's -100) become the query's
excluded ids, as the ``bright:`` loader reads them; every other label is a relevance grade. Records are checked as
the other loaders check theirs: duplicate or empty ids, empty texts and judgements of unknown ids are refused with
the record's number and field.
"""

from __future__ import annotations

from garen_infer.data.dataset import Dataset, Document, Query
from garen_infer.errors import DataError

EXAMPLES = "beir/scifact/test, cranfield, bright/biology"


def load_irds(dataset_id: str, allow_empty_docs: bool = False, documents: bool = True) -> Dataset:
    """A collection by its ir_datasets id; without ``documents`` only its queries and judgements are read."""
    origin = f"irds:{dataset_id}"
    try:
        import ir_datasets
    except ImportError:
        raise DataError(origin,
                        "irds: datasets are read through ir_datasets: pip install -e '.[irds]' (or "
                        "ir-datasets)") from None
    try:
        source = ir_datasets.load(dataset_id)
    except KeyError:
        raise DataError(origin, f"ir_datasets knows no dataset '{dataset_id}' (ids such as {EXAMPLES}; "
                                f"'ir_datasets list' shows them all)") from None
    needed = {**({"documents": source.has_docs()} if documents else {}), "queries": source.has_queries()}
    for part, present in needed.items():
        if not present:
            raise DataError(origin, f"this ir_datasets id has no {part}; name a collection with documents and "
                                    f"queries (e.g. a split such as beir/scifact/test)")
    try:
        docs = _documents(source, origin, allow_empty_docs) if documents else None
        queries = list(source.queries_iter())
        judgements = list(source.qrels_iter()) if source.has_qrels() else []
        excluded_labels = {label for label, text in (source.qrels_defs() if source.has_qrels() else {}).items()
                           if "exclude" in str(text).lower()}
    # ir_datasets fetches what it lacks; offline, or with a partial copy, that fails
    except (OSError, RuntimeError) as err:
        if isinstance(err, RuntimeError) and not str(err.args[0] if err.args else "").startswith("All download "
                                                                                                 "sources failed"):
            raise
        raise DataError(origin,
                        f"ir_datasets could not read or download the collection's files ({_first_line(err)}); place "
                        "them where ir_datasets looks ($IR_DATASETS_HOME, default ~/.ir_datasets) "
                        f"or register a local copy") from None
    return _dataset(dataset_id, origin, docs, queries, judgements, excluded_labels)


def _first_line(err: Exception) -> str:
    """What went wrong, short: ir_datasets' download failure carries every source's full exception."""
    if isinstance(err, RuntimeError) and len(err.args) > 1:
        return f"every download source failed, e.g. {str(err.args[1][0][0]) if err.args[1] else 'none given'}"
    return str(err).splitlines()[0][:300]


def _documents(source, origin: str, allow_empty: bool) -> list[Document]:
    docs: list[Document] = []
    seen: dict[str, int] = {}
    for number, record in enumerate(source.docs_iter(), start=1):
        doc_id = _unique_id(record, "doc_id", "document", seen, number, origin)
        fields = getattr(record, "_fields", ())
        if "text" in fields and "title" in fields:
            text, title = record.text or "", record.title or ""
        else:
            text, title = record.default_text() or "", ""
        if not text.strip() and not title.strip() and not allow_empty:
            raise DataError(origin,
                            "empty (and so is 'title'); pass --allow-empty-docs to keep such documents", number, "text")
        docs.append(Document(doc_id, text, title))
    if not docs:
        raise DataError(origin, "the collection holds no documents")
    return docs


def _unique_id(record, field: str, kind: str, seen: dict, number: int, origin: str) -> str:
    """The record's id, refused when empty or already seen (naming the record where it was first)."""
    value = str(getattr(record, field, "") or "")
    if not value.strip():
        raise DataError(origin, f"missing or empty {kind} id", number, field)
    if value in seen:
        raise DataError(origin, f"duplicate {kind} id '{value}' (first at {kind} {seen[value]})", number, field)
    seen[value] = number
    return value


def _dataset(dataset_id: str, origin: str, docs: list[Document] | None, records, judgements,
             excluded_labels: set) -> Dataset:
    doc_ids = None if docs is None else {d.id for d in docs}  # None: the documents were not read, nor checked
    texts: dict[str, str] = {}
    seen: dict[str, int] = {}
    for number, record in enumerate(records, start=1):
        qid = _unique_id(record, "query_id", "query", seen, number, origin)
        text = record.text if "text" in getattr(record, "_fields", ()) else record.default_text()
        if not isinstance(text, str) or not text.strip():
            raise DataError(origin, f"query '{qid}' has no text", number, "text")
        texts[qid] = text
    qrels: dict[str, dict[str, int]] = {}
    excluded: dict[str, set[str]] = {}
    for number, judgement in enumerate(judgements, start=1):
        qid, doc_id, label = str(judgement.query_id), str(judgement.doc_id), judgement.relevance
        if qid not in texts:
            raise DataError(origin, f"judgement of unknown query id '{qid}'", number, "query_id")
        if label in excluded_labels:
            excluded.setdefault(qid, set()).add(doc_id)  # ids absent from the corpus are ignored, as bright: does
            continue
        if doc_ids is not None and doc_id not in doc_ids:
            raise DataError(origin, f"judgement of unknown document id '{doc_id}'", number, "doc_id")
        try:
            qrels.setdefault(qid, {})[doc_id] = int(label)
        except (TypeError, ValueError):
            raise DataError(origin, f"relevance '{label}' is not an integer", number, "relevance") from None
    for qid, ids in excluded.items():
        both = sorted(d for d in ids if qrels.get(qid, {}).get(d, 0) > 0)
        if both:
            raise DataError(origin, f"document '{both[0]}' is both relevant to and excluded for query '{qid}'")
    queries = [Query(qid, text, frozenset(excluded.get(qid, ()))) for qid, text in texts.items()]
    return Dataset(_name(dataset_id), docs or [], queries, qrels)


def _name(dataset_id: str) -> str:
    """ir_datasets' BRIGHT ids under the ``bright:`` loader's names (``bright/biology-long`` ->
    ``bright/biology:long``),
    so prompts that name the BRIGHT task find it; any other id is its own name."""
    if not dataset_id.startswith("bright/"):
        return dataset_id
    task = dataset_id.split("/", 1)[1]
    long = task.endswith("-long")
    return f"bright/{task.removesuffix('-long').replace('-', '_')}" + (":long" if long else "")
