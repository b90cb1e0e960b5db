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
            print("  trace: iteration -> groups chosen by the navigator (concept labels)")
            for step in steps[:4]:
                labels = "; ".join(groups.concepts[g] for g in step["selected"][:3])
                mode = "explore" if step["explore"] else "exploit"
                print(f"    t={step['t']} {mode:<7} scored {len(step['scored']):>2} new groups; expanded from "
                      f"{len(step['selected'])} groups, first: {labels}")
