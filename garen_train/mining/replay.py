"""GAREN replayed through garen_infer's own run session: the method, scheduler, ledger, response cache and resumable
run folder of ``garen-infer run --method garen``, so the groups mined are the groups inference scores. The
navigator's answers are kept as they go by, so mining does not ask for them twice."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from garen_infer.configuration.presets import run_config_from
from garen_infer.data.dataset import Dataset
from garen_infer.llm.roles import ScoreJob, build_roles
from garen_infer.methods.base import Method, get_method, make_config
from garen_infer.running.runner import RunConfig
from garen_infer.running.session import Session
from garen_infer.storage.append_log import read_finished

if TYPE_CHECKING:
    from garen_infer.index.folder import IndexFolder


SCORE_BATCH = 256  # pairs per call when scoring what the traversal did not


class RecordingScorer:
    """A scorer that keeps every P(yes) it returns, by (query, text)."""

    def __init__(self, inner) -> None:
        self.inner, self.name = inner, inner.name
        self.scores: dict[tuple[str, str], float] = {}

    def score(self, jobs):
        completions = self.inner.score(jobs)
        self.scores.update(zip(((j.query, j.text) for j in jobs), (c.score for c in completions)))
        return completions

    def scores_for(self, pairs: list[tuple[str, str]]) -> list[float]:
        """P(yes) for each pair, scoring (in batches, with progress) only the pairs not seen yet."""
        missing = [p for p in dict.fromkeys(pairs) if p not in self.scores]
        with tqdm(total=len(missing), desc="navigator scores", unit="pair", disable=not missing) as bar:
            for start in range(0, len(missing), SCORE_BATCH):
                batch = missing[start : start + SCORE_BATCH]
                self.score([ScoreJob(query, text) for query, text in batch])
                bar.update(len(batch))
        return [self.scores[p] for p in pairs]


@dataclass
class Traversal:
    method: Method  # GAREN as it ran (its groups, their texts, its options)
    config: RunConfig
    saved_config: dict  # the run folder's config.json
    metrics: dict  # the run folder's metrics.json (nDCG, R@100, App. C.3 rates)
    records: dict[str, dict]  # qid -> the trace record of that query
    navigator: RecordingScorer | None
    seconds: float  # spent on queries this call (0 when the run folder was already complete)


def replay_garen(dataset: Dataset, index: IndexFolder, preset: dict, out: Path, cache, budget=None,
                 limit=None, max_active=None, shard=None) -> Traversal:
    config = run_config_from(preset, "garen", budget, limit, max_active, shard)
    method_cls = get_method("garen")
    models = {role: config.models[role] for role in config.roles if role in config.models}
    # an oracle reads its qrels
    roles = build_roles(models, [d.full_text for d in dataset.documents], index, cache, dataset=dataset)
    navigator = None
    if "navigator" in roles.scorers:
        navigator = roles.scorers["navigator"] = RecordingScorer(roles.scorers["navigator"])
    start = time.perf_counter()
    metrics = Session(dataset, index, config, cache, roles).run(out)
    seconds = time.perf_counter() - start
    saved = json.loads((out / "config.json").read_text(encoding="utf-8"))
    method = method_cls(make_config(method_cls, saved["method_options"]), index, dataset)
    return Traversal(method, config, saved, metrics, read_finished(out / "trace.jsonl", "qid"), navigator, seconds)
