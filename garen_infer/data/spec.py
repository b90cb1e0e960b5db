"""Dataset specs as the CLI takes them.

- ``beir:<folder>[:<split>]`` or a bare BEIR folder (split ``test``)
- ``bright:<task>[:long][@<source>][@<revision>]`` (source: hub name or local copy; default ``xlangai/BRIGHT``;
  revision: a commit, branch or tag of the hub dataset, which pins a figure to one version of BRIGHT)
- ``r2med:<task>[@<folder> | @<revision> | @<owner>@<revision>]`` (R2MED's eight tasks, e.g. ``r2med:Biology``,
  from the hub datasets ``R2MED/<task>`` or a local folder with the task's corpus/query/qrels.jsonl)
- ``jsonl:<corpus.jsonl>[,<queries.jsonl>[,<qrels.tsv>]]``
- ``irds:<id>``: a collection ir_datasets knows (``irds:beir/scifact/test``, ``irds:cranfield``)
- ``stdlib-docs``: the embedded demo corpus, built from this Python's own standard-library documentation
"""

from __future__ import annotations

from pathlib import Path

from garen_infer.data.dataset import Dataset
from garen_infer.errors import DataError


def load_dataset(spec: str, allow_empty_docs: bool = False) -> Dataset:
    """Load the dataset a spec names; ``allow_empty_docs`` keeps BEIR documents with neither title nor text."""
    return _load(spec, allow_empty_docs, documents=True)


def load_judgments(spec: str) -> Dataset:
    """The queries and relevance judgements a spec names, without its documents: all that scoring a run needs,
    at a cost that does not grow with the corpus (benchmarks/scoring_reads.py). The judged document ids are not
    checked against the corpus (it is not read); the dataset's name is the one ``load_dataset`` gives."""
    return _load(spec, allow_empty_docs=True, documents=False)


def _load(spec: str, allow_empty_docs: bool, documents: bool) -> Dataset:
    kind, _, rest = spec.partition(":")
    if spec == "stdlib-docs":
        from garen_infer.data.stdlib_docs import load_stdlib_docs

        return load_stdlib_docs()  # built in memory from docstrings, documents and all
    if kind == "bright" and rest:
        from garen_infer.data.bright import load_bright, source_and_revision

        rest, _, pin = rest.partition("@")
        task, _, variant = rest.partition(":")
        if variant not in ("", "long"):
            raise DataError(spec, f"unknown BRIGHT variant '{variant}' (only 'long')")
        source, revision = source_and_revision(pin)
        return load_bright(task, long_documents=variant == "long", source=source, revision=revision,
                           documents=documents)
    if kind == "r2med" and rest:
        from garen_infer.data.r2med import load_r2med, source_and_revision

        task, _, pin = rest.partition("@")
        source, revision = source_and_revision(pin)
        return load_r2med(task, source=source, revision=revision, documents=documents)
    if kind == "irds" and rest:
        from garen_infer.data.irds import load_irds

        return load_irds(rest, allow_empty_docs, documents)
    if kind == "jsonl" and rest:
        from garen_infer.data.jsonl import load_jsonl

        files = rest.split(",")
        if len(files) > 3:
            raise DataError(spec, f"a jsonl spec names at most 3 files (corpus, queries, qrels), got {len(files)}")
        corpus, queries, qrels = [*files, None, None][:3]
        assert corpus is not None  # rest is not empty
        return load_jsonl(corpus, queries, qrels, documents=documents)
    location = beir_location(spec)
    if location is not None:
        from garen_infer.data.beir import load_beir

        return load_beir(*location, allow_empty_docs, documents)
    raise DataError(spec, "not a dataset spec: use beir:<folder>[:split], bright:<task>, r2med:<task>, "
                          "jsonl:<corpus>[,<queries>[,<qrels>]], irds:<id> or stdlib-docs")


def beir_location(spec: str) -> tuple[str, str] | None:
    """(folder, split) that a BEIR spec names (split ``test`` by default); None for a spec of another kind."""
    kind, _, rest = spec.partition(":")
    if kind == "beir" and rest:
        if ":" in rest and not Path(rest).exists():
            folder, _, split = rest.rpartition(":")
            return folder, split
        return rest, "test"
    if kind not in ("bright", "r2med", "jsonl", "irds") and spec != "stdlib-docs" and Path(spec).is_dir():
        return spec, "test"
    return None
