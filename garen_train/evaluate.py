"""``garen-train evaluate --pairs FILE --model SPEC``: any garen_infer scorer on mined pairs, with the validation
metrics of the training jobs (per-query AUC, R@K, nDCG@10, and the first-stage order where pairs carry ranks).

It answers "how good is this navigator or reranker, zero-shot or trained, on these queries?" for scorers that
are not LightningModules, such as the CPU default's embedding cosine, an export behind any backend, or a model
served elsewhere. SPEC is a model spec as configs write it (JSON or YAML), e.g.

    garen-train evaluate --pairs mined/scifact-test/groups.jsonl --model '{backend: embedding}'
    garen-train evaluate --pairs mined/scifact-train/groups.jsonl --held-out
        --model '{backend: cross-encoder, model: exports/nav}'

``--held-out`` scores only the validation queries of the training split (same ``--val-fraction`` and ``--seed``
as the job's data section), so the figures sit next to the job's own validation figures. Answers go through
the response cache, so a rerun costs nothing.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import yaml

from garen_infer.errors import GarenError
from garen_infer.llm.roles import ScoreJob
from garen_train.pairs_data import MinedPairsDataModule
from garen_train.scorers.metrics import scorer_metrics


def make_scorer(spec: dict, cache):
    """The yes/no scorer a navigator role with this spec would use. There is no index here, so an embedding role
    names its model (by default the CPU default's)."""
    from garen_infer.llm.embeddings import EmbeddingParams
    from garen_infer.llm.model_specs import backend_of
    from garen_infer.llm.roles import build_roles

    if backend_of(spec) == "embedding":
        spec = {"model": EmbeddingParams.model, **spec}
    return build_roles({"scorer": spec}, [], None, cache).scorer("scorer")


def evaluate(pairs_path: str, spec: dict, held_out: bool, val_fraction: float, seed: int, max_negatives: int | None,
             recall_at: int, cache, batch: int = 256, limit: int | None = None) -> dict:
    data = MinedPairsDataModule(pairs_path, val_fraction=val_fraction if held_out else 0.0, seed=seed,
                                max_negatives=max_negatives)
    data.setup("validate")
    queries = (data.val_queries if held_out else data.train_queries)[:limit]
    pairs = [(number, p) for number, q in enumerate(queries) for p in q.pairs]
    if not pairs:
        raise GarenError(f"{pairs_path}: no pairs to evaluate")
    scorer = make_scorer(spec, cache)
    scores: list[float] = []
    for start in range(0, len(pairs), batch):
        chunk = [p for _, p in pairs[start : start + batch]]
        scores += [c.score for c in scorer.score([ScoreJob(p.query, p.text) for p in chunk])]
    metrics = scorer_metrics(
        np.array([n for n, _ in pairs]), np.array([p.label for _, p in pairs]), np.array(scores),
        np.array([-1 if p.rank is None else p.rank for _, p in pairs]), recall_at,
    )
    return {"pairs_file": pairs_path, "queries": len(queries), "held_out": held_out,
            "scorer": getattr(scorer, "name", ""),
            "model": spec, "metrics": {k: round(v, 6) for k, v in metrics.items()}}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="garen-train evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", required=True, help="a mined pairs JSONL file (groups.jsonl or documents.jsonl)")
    parser.add_argument("--model", required=True, help="a model spec, JSON or YAML, e.g. '{backend: embedding}'")
    parser.add_argument("--held-out", action="store_true", help="only the validation queries of the training split")
    parser.add_argument("--val-fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-negatives", type=int, default=None)
    parser.add_argument("--limit", type=int, default=None, help="only the first N queries (file order)")
    parser.add_argument("--recall-at", type=int, default=20, help="K of R@K (GAREN's K_g = 20)")
    parser.add_argument("--cache", help="response cache file (default: $GAREN_CACHE_DIR/responses.sqlite)")
    parser.add_argument("--no-cache", action="store_true")
    args = parser.parse_args(argv)
    try:
        spec = yaml.safe_load(args.model)
    except yaml.YAMLError as err:
        raise GarenError(f"--model is not JSON or YAML ({err})") from None
    if not isinstance(spec, dict):
        raise GarenError("--model must be a mapping, e.g. '{backend: embedding}'")
    from garen_infer.llm.cache import NoCache, ResponseCache

    cache = NoCache() if args.no_cache else ResponseCache(args.cache)
    result = evaluate(args.pairs, spec, args.held_out, args.val_fraction, args.seed, args.max_negatives,
                      args.recall_at, cache, limit=args.limit)
    print(json.dumps(result, indent=2))
    return 0
