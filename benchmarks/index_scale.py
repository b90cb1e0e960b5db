"""Index stages at size: time and peak memory per stage on synthetic corpora of 50K to 400K documents.

The vectors are precomputed (planted clusters on the unit sphere) and imported through the embeddings stage's
``vectors:`` option, so the embedding model does not dominate; the texts are short bags of cluster words, so
BM25 and the extractive group summaries do real work. Each stage is built by its own ``garen-infer index``
process: its wall time and peak RSS (``wait4``) are the stage's, including loading the corpus, which a
``corpus only`` row measures alone. The k-NN graph is timed both ways below the exact threshold (exact and IVF);
above it (400K) only IVF, the default there. Growth exponents are least-squares slopes of log time on log n.

    python benchmarks/index_scale.py --sizes 50000 100000 200000 400000 --work SCRATCH_DIR
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parent.parent
VOCAB = 12  # topic words per cluster
COMMON = [f"w{i}" for i in range(2000)]  # words shared by every cluster
# manifest facts shown
NOTES = ("recall_at_k", "nlist", "nprobe", "groups", "mean", "max", "partition_seconds", "degree")


def synthetic_corpus(n: int, dim: int, cluster_size: int, seed: int, folder: Path) -> Path:
    """Write corpus.jsonl and vectors.npy (+ vectors.ids.txt): clusters of ``cluster_size`` documents whose
    vectors scatter around a random centre (cosine to it about 0.7) and whose texts share topic words."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    clusters = max(1, n // cluster_size)
    label = rng.integers(0, clusters, size=n)
    vectors = np.lib.format.open_memmap(folder / "vectors.npy", mode="w+", dtype=np.float32, shape=(n, dim))
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    for start in range(0, n, 65536):
        part = label[start : start + 65536]
        noise = rng.standard_normal((len(part), dim)).astype(np.float32) / math.sqrt(dim)
        block = centres[part] + noise
        vectors[start : start + len(part)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    vectors.flush()
    del vectors
    ids = [f"d{i}" for i in range(n)]
    (folder / "vectors.ids.txt").write_text("\n".join(ids) + "\n")
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as out:
        for i in range(n):
            c = int(label[i])
            topic = [f"c{c}t{j}" for j in rng.integers(0, VOCAB, size=8)]
            words = topic + [COMMON[j] for j in rng.integers(0, len(COMMON), size=22)]
            rng.shuffle(words)
            out.write(json.dumps({"_id": ids[i], "title": f"cluster {c} item", "text": " ".join(words) + "."}) + "\n")
    return folder


def stage_plan(n: int, exact_max: int) -> list[tuple[str, str, dict]]:
    """(row label, stage, params) in build order; each row adds or rebuilds one stage."""
    plan = [("corpus only", "", {}), ("bm25", "bm25", {}),
            ("embeddings (import)", "embeddings", {"vectors": "VECTORS"})]
    if n <= exact_max:
        plan.append(("knn_graph ivf", "knn_graph", {"search": "ivf"}))
    plan.append(("knn_graph exact" if n <= exact_max else "knn_graph ivf", "knn_graph",
                 {"search": "auto", "exact_max_docs": exact_max}))
    plan += [("groups (leiden + extractive)", "groups", {}),
             ("proximity_graph (diskann, 1 thread)", "proximity_graph", {})]
    return plan


def run_stage(work: Path, index: Path, stages: dict, log: Path) -> tuple[float, float]:
    """One ``garen-infer index`` process: its wall seconds and peak RSS in MiB."""
    preset = work / "preset.yaml"
    preset.write_text(yaml.safe_dump({"index": stages}))
    command = [sys.executable, "-m", "garen_infer", "index", "--dataset", f"jsonl:{work / 'corpus.jsonl'}",
               "--preset", str(preset), "--out", str(index)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}
    start = time.perf_counter()
    with open(log, "a") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"stage build failed ({command}); see {log}")
    return seconds, usage.ru_maxrss / 1024


def measure(n: int, args) -> list[dict]:
    work = synthetic_corpus(n, args.dim, args.cluster_size, args.seed, args.work / f"n{n}")
    index, log = work / "index", work / "build.log"
    shutil.rmtree(index, ignore_errors=True)
    built: dict[str, dict] = {}
    rows = []
    for label, stage, params in stage_plan(n, args.exact_max_docs):
        params = {k: (str(work / "vectors.npy") if v == "VECTORS" else v) for k, v in params.items()}
        if stage:
            built[stage] = params
        wall, rss = run_stage(work, index, dict(built), log)
        manifest = (
            json.loads((index / "manifest.json").read_text())
            if (index / "manifest.json").exists()
            else {"stages": {}}
        )
        info = manifest["stages"].get(stage, {}).get("info", {}) if stage else {}
        row = {"n": n, "stage": label, "stage_s": info.get("seconds"), "process_s": round(wall, 1),
               "peak_mib": round(rss)}
        for key in NOTES:
            if key in info:
                row[key] = info[key]
        rows.append(row)
        print(json.dumps(row), flush=True)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def growth(rows: list[dict]) -> dict[str, float]:
    """Per stage: the slope of log(stage seconds) on log(n) over the sizes measured."""
    out = {}
    for stage in dict.fromkeys(r["stage"] for r in rows):
        points = [
            (math.log(r["n"]), math.log(r["stage_s"] or r["process_s"]))
            for r in rows
            if r["stage"] == stage and (r["stage_s"] or r["process_s"])
        ]
        if len(points) >= 2:
            x, y = np.array(points).T
            out[stage] = round(float(np.polyfit(x, y, 1)[0]), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50_000, 100_000, 200_000, 400_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--cluster-size", type=int, default=50)
    parser.add_argument("--exact-max-docs", type=int, default=200_000, help="as index.knn_graph.exact_max_docs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=Path("runs/index-scale"))
    parser.add_argument("--keep", action="store_true", help="keep the corpora and indexes")
    args = parser.parse_args()
    rows = [row for n in args.sizes for row in measure(n, args)]
    print("\n| documents | stage | stage s | process s | peak RSS MiB | notes |")
    print("|---:|---|---:|---:|---:|---|")
    for r in rows:
        notes = ", ".join(f"{k} {r[k]}" for k in NOTES if k in r)
        print(f"| {r['n']:,} | {r['stage']} | {r['stage_s'] if r['stage_s'] is not None else ''} | "
              f"{r['process_s']} | {r['peak_mib']} | {notes} |")
    print("\ngrowth exponent (time ~ n^x):", json.dumps(growth(rows)))


if __name__ == "__main__":
    main()
