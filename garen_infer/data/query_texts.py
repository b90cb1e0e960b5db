"""Query texts other than the dataset's own, for a first stage that searches with a rewritten query (GAREN Table 4
starts from BRIGHT's GPT-4 reasoning queries) while every model downstream still reads the original.

- ``bright:<model>[@<source>][@<revision>]``: BRIGHT's published reasoning queries by that model, for the task of
  a ``bright:`` dataset (source and revision as in a ``bright:`` dataset spec: a hub name or a local copy);
- ``jsonl:<queries.jsonl>[#<field>]``: a column of a JSONL or BEIR queries file (rows with ``_id`` or ``id``;
  the field, ``text`` by default, at the top level or in BEIR's ``metadata``).
"""

from __future__ import annotations

from pathlib import Path

from garen_infer.data.validate import read_jsonl, require_text
from garen_infer.errors import DataError, GarenError

FORMS = ("bright:<model>[@<source>][@<revision>], jsonl:<queries.jsonl>[#<field>] "
         "or rewrite (the generator writes it)")


def rewritten_queries(spec: str, dataset_name: str) -> dict[str, str]:
    """Query id -> text, from the source ``spec`` names."""
    kind, _, rest = spec.partition(":")
    if kind == "bright" and rest:
        from garen_infer.data.bright import load_reasoning_queries, source_and_revision

        if not dataset_name.startswith("bright/"):
            raise GarenError(f"first_stage.query '{spec}': BRIGHT's reasoning queries need a bright:<task> dataset, "
                             f"not '{dataset_name}'")
        model, _, pin = rest.partition("@")
        task = dataset_name.removeprefix("bright/").split(":")[0]
        source, revision = source_and_revision(pin)
        return load_reasoning_queries(task, model, source=source, revision=revision)
    if kind == "jsonl" and rest:
        path, _, field = rest.partition("#")
        return query_column(Path(path), field or "text")
    raise GarenError(f"first_stage.query '{spec}': use original, {FORMS}")


def query_column(path: Path, field: str) -> dict[str, str]:
    texts = {}
    for line, row in read_jsonl(path):
        qid = require_text(row, "_id" if "_id" in row else "id", path, line)
        holder = row if field in row else row["metadata"] if isinstance(row.get("metadata"), dict) else row
        texts[qid] = require_text(holder, field, path, line)
    if not texts:
        raise DataError(path, "the file holds no queries")
    return texts
