"""The embedded default: index this Python's standard-library documentation, run a method on a few questions,
and show the ranked answers with the method's trace. Offline, CPU only, models from PyPI packages."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from garen_infer.configuration.presets import load_preset, run_config_from
from garen_infer.data.stdlib_docs import load_stdlib_docs
from garen_infer.index.folder import IndexFolder
from garen_infer.index.stages import IndexConfig
from garen_infer.llm.cache import ResponseCache

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset


NEXT_STEPS = """
Next steps
  BEIR folder : garen-infer index --dataset beir:path/to/scifact:test --out idx/scifact
                garen-infer run   --dataset beir:path/to/scifact:test --index idx/scifact --method garen \
--budget 100 --out runs/scifact-garen
  BRIGHT      : garen-infer index --dataset bright:biology --out idx/biology   (downloads xlangai/BRIGHT through \
`datasets`)
                garen-infer run   --dataset bright:biology --index idx/biology --method garen --out runs/biology-garen
  GPU presets : --preset garen-paper (Qwen3 models on vLLM); see docs/engines.md
  Methods     : {methods}
  Score a run : garen-infer eval --dataset ... --run run.trec
"""


def run_demo(out: Path | None = None, method: str = "garen") -> int:
    from garen_infer.running.session import Session

    out = out or default_folder()
    preset = load_preset("cpu-default")
    dataset = load_stdlib_docs()
    print(f"Corpus: {len(dataset.documents)} docstrings of the Python standard library ({dataset.name}); "
          "preset cpu-default")
    index = IndexFolder.build(dataset, out / "index", IndexConfig.from_dict(preset["index"]), log=lambda m: print(m))
    run_dir = out / f"run-{method}"
    config = run_config_from(preset, method, budget=None)
    metrics = Session(dataset, index, config, ResponseCache(out / "responses.sqlite"), log=print).run(run_dir)
    _show(dataset, index, run_dir, method)
    print(
        f"\nPer query: {metrics['mean_budget_used']:.0f} documents reranked, {metrics['mean_requests']:.1f} "
        f"model requests ({metrics['mean_model_calls']:.1f} computed, {metrics['mean_cache_hits']:.1f} from the cache)"
    )
    print(f"Run folder: {run_dir} (run.trec, metrics.json, trace.jsonl)")
    print(next_steps())
    return 0


def default_folder() -> Path:
    """The demo's folder under the cache root, one per installed copy of the package: two checkouts (or a checkout
    and a wheel) never resume each other's index and run folder."""
    import hashlib

    root = Path(os.environ.get("GAREN_CACHE_DIR") or Path.home() / ".cache" / "garen")
    package = str(Path(__file__).resolve().parent)
    return root / f"demo-{hashlib.sha256(package.encode()).hexdigest()[:12]}"


def next_steps() -> str:
    """The closing hints; the method list is the registry's, so a new method shows up here without an edit."""
    from garen_infer.methods.base import METHODS

    return NEXT_STEPS.format(methods=", ".join(METHODS))


def _show(dataset: Dataset, index: IndexFolder, run_dir: Path, method: str) -> None:
    import json

    titles = {d.id: d.text.split("\n", 1)[0][:90] for d in dataset.documents}
    groups = index.groups() if index.has("groups") else None
    records = {}
    for line in (run_dir / "trace.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        records[record["qid"]] = record
    for query in dataset.queries:
        record = records[query.id]
        print(f"\n=== {query.text}")
        for rank, doc_id in enumerate(record["ranking"][:5], start=1):
            print(f"  {rank}. {doc_id:<38} {titles[doc_id]}")
        steps = record["trace"].get("iterations")
        if method == "garen" and steps and groups is not None:
            print("  trace: per iteration, the groups the navigator scored and where the window's new documents "
                  "came from (group concept labels)")
            for line in trace_lines(steps, groups.concepts):
                print(f"    {line}")


def trace_lines(steps: list[dict], concepts: list[str]) -> list[str]:
    """GAREN's iterations, one line each, saying what changed: the groups expanded for the first time in this
    query; consecutive iterations that read the same are one line (``t=3..4``)."""
    said: list[tuple[tuple[int, int], str]] = []
    previous: list[int] | None = None
    seen: set[int] = set()  # the groups expanded so far
    for step in steps:
        selected = step["selected"]
        count = f"{step['expanded']} " if "expanded" in step else ""  # a trace written before it was recorded
        filled = (
            f", {step['filled_from_first_stage']} from the first stage"
            if step.get("filled_from_first_stage")
            else ""
        )
        mode = "explore" if step["explore"] else "exploit"
        text = (f"{mode}  scored {_count(len(step['scored']), 'new group', 2)}; {count}documents from "
                f"{_source(selected, previous, seen, concepts)}{filled}")
        if said and said[-1][1] == text:
            said[-1] = (said[-1][0][0], step["t"]), text
        else:
            said.append(((step["t"], step["t"]), text))
        previous, seen = selected, seen | set(selected)
    width = max((len(_span(t)) for t, _ in said), default=0)
    return [f"{_span(t):<{width}} {text}" for t, text in said]


def _source(selected: list[int], previous: list[int] | None, seen: set[int], concepts: list[str]) -> str:
    """Where an iteration's documents came from, against the iteration before and the groups already expanded."""
    if not selected:
        return "no group"
    if previous is not None and set(selected) == set(previous):
        return f"the same {_count(len(selected), 'group')}"
    new = [g for g in selected if g not in seen]
    if previous is None:
        return _labels(_count(len(selected), "group"), new, concepts)
    if new:
        return _labels(f"{_count(len(selected), 'group')}, {len(new)} new", new, concepts)
    return f"{_count(len(selected), 'group')}, none new, first: {concepts[selected[0]]}"  # exploit: the one it drains


def _count(n: int, noun: str, width: int = 0) -> str:
    return f"{n:>{width}} {noun}{'s' * (n != 1)}"


def _span(t: tuple[int, int]) -> str:
    return f"t={t[0]}" if t[0] == t[1] else f"t={t[0]}..{t[1]}"


def _labels(head: str, groups: list[int], concepts: list[str], shown: int = 3) -> str:
    more = f" (+{len(groups) - shown} more)" if len(groups) > shown else ""
    return f"{head}: {'; '.join(concepts[g] for g in groups[:shown])}{more}"
