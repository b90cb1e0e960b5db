"""Several runs of one configuration, one sampling seed each, and their mean (GAREN sec. 5: "we report results
averaged over 5 runs due to the variance of vLLM inference").

Run k goes to ``<out>/seed-<k>`` with every LLM role's ``sampling.seed`` set to k; the seed is part of the response
cache key, so each run really asks the models again (a rerun of one seed is still served from the cache).
``<out>/metrics.json`` holds the mean and standard deviation of every numeric metric and each run's values.
Deterministic roles (the embedding stand-ins) give the same numbers every time: a standard deviation of 0.
"""

from __future__ import annotations

import copy
import statistics
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from garen_infer.llm.model_specs import backend_of
from garen_infer.storage.atomic import write_json

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.index.folder import IndexFolder


def with_seed(models: dict, seed: int) -> dict:
    """The models with ``sampling.seed`` set on every role that runs an LLM."""
    out = copy.deepcopy(models or {})
    for spec in out.values():
        if spec and backend_of(spec) != "embedding":
            spec["sampling"] = {**(spec.get("sampling") or {}), "seed": seed}
    return out


def run_seeds(dataset: Dataset, index: IndexFolder, config, out: str | Path, seeds: int, run=None,
              **kwargs) -> dict:
    """Execute ``config`` once per seed 0..seeds-1 and write the mean; returns the averaged metrics."""
    from garen_infer.running.session import execute

    run = run or execute
    out = Path(out)
    per_seed = [
        run(dataset, index, replace(config, models=with_seed(config.models, k)), out / f"seed-{k}", **kwargs)
        for k in range(seeds)
    ]
    numeric = [
        key
        for key, value in per_seed[0].items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    ]
    summary = {
        "dataset": per_seed[0].get("dataset"), "method": per_seed[0].get("method"), "runs": seeds,
        "mean": {key: round(statistics.fmean(m[key] for m in per_seed), 6) for key in numeric},
        "std": {key: round(statistics.pstdev(m[key] for m in per_seed), 6) for key in numeric},
        "per_seed": [{key: m[key] for key in numeric} for m in per_seed],
    }
    write_json(out / "metrics.json", summary)
    return summary
