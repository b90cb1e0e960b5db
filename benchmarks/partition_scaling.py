"""How the soft-partition job's cost grows with the corpus: CPU time and peak memory of ``garen-train fit``
(configs/train/partition-dmon.yaml) on synthetic corpora with planted clusters, and on real index folders.

    python benchmarks/partition_scaling.py --sizes 50000 100000 200000 --epochs 3 --work runs/partition-scaling
    python benchmarks/partition_scaling.py --index /path/to/scifact-index --epochs 3 --work runs/partition-scaling

A synthetic corpus: n random unit vectors (384-d, like all-MiniLM-L6-v2) around n/100 random centres, its exact
16-NN graph (faiss, as the knn_graph stage) and its Leiden groups (garen_infer's own, s-bar = 20), written once
as an index folder under --work and reused. Each fit runs in a fresh process; the table gives its CPU seconds
(user + system, all threads; on a shared machine a steadier figure than wall seconds), wall seconds, peak resident
memory, and the job's own timings from the checkpoint: CPU seconds to load the graph with its SIGN features, and
the mean epoch's CPU and wall seconds (batches plus the exact evaluation that ends each epoch).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "configs" / "train" / "partition-dmon.yaml"


def synthetic_index(work: Path, n: int) -> tuple[Path, dict]:
    import numpy as np

    from garen_infer.index.grouping.partition import leiden_groups
    from garen_infer.index.knn_graph import KnnGraph
    from garen_train.partition.synthetic import planted_vectors, write_index

    path = work / f"synthetic-{n}"
    facts_path = path / "build.json"
    if facts_path.is_file():
        return path, json.loads(facts_path.read_text())
    start = time.perf_counter()
    vectors, _ = planted_vectors(n, max(2, n // 100), dim=384, spread=1.0, seed=n)
    made = time.perf_counter()
    graph = KnnGraph.build(vectors, 16)
    knn = time.perf_counter()
    groups = leiden_groups(graph.neighbours, graph.weights, max_group_size=20)
    leiden = time.perf_counter()
    labels = np.empty(n, dtype=np.int32)
    for g, rows in enumerate(groups):
        labels[rows] = g
    write_index(path, vectors, graph, groups=labels, name=f"synthetic-{n}")
    facts = {"vectors_s": round(made - start, 1), "knn_s": round(knn - made, 1),
             "leiden_s": round(leiden - knn, 1), "groups": len(groups)}
    facts_path.write_text(json.dumps(facts))
    return path, facts


def fit_child(index: str, out: str, epochs: int) -> None:
    """Run one fit in this process and print its resource use as one JSON line."""
    from garen_train.checkpoint_file import read_checkpoint
    from garen_train.cli import main

    start = time.perf_counter()
    main(["fit", "--config", str(CONFIG), f"--data.init_args.index={index}", f"--trainer.max_epochs={epochs}",
          f"--trainer.default_root_dir={out}", f"--trainer.callbacks.init_args.dirpath={out}",
          "--trainer.enable_progress_bar=false",
          "--trainer.enable_model_summary=false"])
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    checkpoint = read_checkpoint(Path(out) / "last.ckpt")
    partition, state = checkpoint["partition"], checkpoint["state_dict"]
    epochs_run = [h for h in partition["history"] if "seconds" in h]

    def mean(key: str) -> float:
        return round(sum(h[key] for h in epochs_run) / max(1, len(epochs_run)), 2)

    print(json.dumps({
        "docs": len(state["init_group"]), "groups": len(state["prototypes"]),
        "candidates_per_doc": int(state["candidates"].shape[1]),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "wall_s": round(wall, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "graph_cpu_s": partition.get("graph_cpu_seconds"), "epoch_cpu_s": mean("cpu_seconds"),
        "epoch_wall_s": mean("seconds"),
        "modularity_start": round(partition["history"][0]["modularity"], 4),
        "modularity_end": round(partition["history"][-1]["modularity"], 4),
    }))


def measure(index: Path, work: Path, epochs: int) -> dict:
    out = work / "fits" / index.name
    # a fresh fit: Lightning would otherwise write last-v1.ckpt beside the old one
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, __file__, "--child", str(index), str(out), str(epochs)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    if result.returncode:
        raise SystemExit(f"fit on {index} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        fit_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[], help="synthetic corpus sizes")
    parser.add_argument("--index", nargs="*", default=[], help="real index folders (embeddings, knn_graph, groups)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--work", default="runs/partition-scaling", help="where synthetic indexes and fits go")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for path in args.index:
        rows.append({"corpus": Path(path).name, **measure(Path(path), work, args.epochs)})
        print(json.dumps(rows[-1]), flush=True)
    for n in args.sizes:
        index, facts = synthetic_index(work, n)
        rows.append({"corpus": f"synthetic {n}", **measure(index, work, args.epochs),
                     "knn_build_s": facts["knn_s"], "leiden_s": facts["leiden_s"]})
        print(json.dumps(rows[-1]), flush=True)
    keys = list(dict.fromkeys(k for row in rows for k in row))
    print("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row.get(k, "")) for k in keys) + " |")


if __name__ == "__main__":
    main()
