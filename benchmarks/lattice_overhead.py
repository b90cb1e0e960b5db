"""LATTICE's own time per query, outside model calls: the same LATTICE run from one or more checkouts of the code.

Each checkout runs ``garen-infer run --method lattice`` one query at a time (``--max-active-queries 1``, no
response cache) on a prebuilt index, in its own process; the time outside model calls is the run's wall time per
query minus the model seconds its ledgers count. It prints one row per checkout: ms/query in all, in model calls
and outside them, model calls per query, nDCG@10 and R@100.

    python benchmarks/lattice_overhead.py --dataset beir:../shared/data/cranfield:test --allow-empty-docs \\
        --index INDEX_DIR --out OUT_DIR --code OLD_CHECKOUT --code . [--budget 100] [--limit N]

A checkout is a folder holding ``garen_infer`` (``--code .``: this one); the interpreter is the one running this
script. Seconds on a shared machine are upper bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path


def run_one(code: Path, args, out: Path) -> dict:
    # the checkout first on the path (``python -m`` would put the working folder first, whatever PYTHONPATH says)
    # the package's __main__, which every revision has, wherever its command line module lives
    start = (
        f"import runpy, sys; sys.path.insert(0, {str(code.resolve())!r}); "
        "runpy.run_module('garen_infer', run_name='__main__')"
    )
    command = [sys.executable, "-c", start, "run", "--dataset", args.dataset, "--index", args.index,
               "--method", "lattice", "--out", str(out), "--max-active-queries", "1", "--no-cache",
               *(["--allow-empty-docs"] if args.allow_empty_docs else []),
               *(["--budget", str(args.budget)] if args.budget else []),
               *(["--limit", str(args.limit)] if args.limit else []),
               *[arg for setting in args.set for arg in ("--set", setting)]]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "metrics.json").read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--allow-empty-docs", action="store_true")
    ap.add_argument("--index", required=True, help="a prebuilt index with the semantic_tree stage")
    ap.add_argument("--out", required=True, help="run folders go here, one per checkout (must not exist yet)")
    ap.add_argument("--code", action="append", required=True, help="a checkout holding garen_infer (repeatable)")
    ap.add_argument("--budget", type=int, default=None, help="documents shown before LATTICE stops (default: none)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a preset override for every run")
    args = ap.parse_args(argv)
    out = Path(args.out)
    rows = []
    for i, code in enumerate(args.code):
        m = run_one(Path(code), args, out / f"{i}-{Path(code).resolve().name}")
        wall, model = 1000 * m["wall_seconds_per_query"], 1000 * m["mean_model_seconds"]
        rows.append((code, wall, model, wall - model, m["mean_model_calls"], m["nDCG@10"], m["R@100"]))
    print(f"{'checkout':40} {'ms/query':>9} {'in model':>9} {'outside':>9} {'calls/q':>8} {'nDCG@10':>8} {'R@100':>7}")
    for code, wall, model, outside, calls, ndcg, recall in rows:
        print(f"{code:40} {wall:9.1f} {model:9.1f} {outside:9.1f} {calls:8.1f} {ndcg:8.4f} {recall:7.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
