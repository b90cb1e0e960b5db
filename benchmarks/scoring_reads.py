"""What scoring a run costs when it reads the whole dataset (``load_dataset``, as `eval` and `compare` did)
and when it reads the queries and judgements alone (``load_judgments``, as they do now): wall seconds and
peak memory of a fresh process that loads the dataset and scores one run, side by side in one invocation.

The run scored is made from the judgements (each judged query's documents, best grade first), so both ways
print the same nDCG@10 and R@100. ``--copies K`` scores against a BEIR folder whose corpus is the dataset's
repeated K times (ids suffixed), written under --work: a larger corpus with the same judgements, to see how
each way grows with the corpus.

    python benchmarks/scoring_reads.py --dataset ../shared/data/scifact --copies 1 20
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = """
import json, resource, sys, time
start = time.perf_counter()
from garen_infer.data import load_dataset, load_judgments
from garen_infer.evaluation.evaluate import evaluate
from garen_infer.storage.trec import read_run
spec, run_path, how = sys.argv[1:4]
dataset = load_dataset(spec, allow_empty_docs=True) if how == "whole dataset" else load_judgments(spec)
scores = evaluate(read_run(run_path), dataset, ("nDCG@10", "R@100"))
peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": time.perf_counter() - start, "peak_mib": peak_mib,
                  "documents": len(dataset.documents), "nDCG@10": scores["nDCG@10"], "R@100": scores["R@100"]}))
"""


def padded_copy(folder: Path, copies: int, work: Path) -> Path:
    """The BEIR folder with its corpus written ``copies`` times (later copies' ids suffixed #2, #3, ...)."""
    if copies == 1:
        return folder
    target = work / f"{folder.name}-x{copies}"
    if not target.is_dir():
        target.mkdir(parents=True)
        shutil.copy2(folder / "queries.jsonl", target / "queries.jsonl")
        shutil.copytree(folder / "qrels", target / "qrels")
        lines = (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
        with (target / "corpus.jsonl").open("w", encoding="utf-8") as out:
            for copy in range(1, copies + 1):
                for line in lines:
                    doc = json.loads(line)
                    if copy > 1:
                        doc["_id"] = f"{doc['_id']}#{copy}"
                    out.write(json.dumps(doc) + "\n")
    return target


def run_from_judgements(folder: Path, split: str, out: Path) -> Path:
    judged: dict[str, dict[str, int]] = {}
    for line in (folder / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]:
        qid, doc, grade = line.split("\t")
        judged.setdefault(qid, {})[doc] = int(grade)
    with out.open("w") as run:
        for qid, docs in judged.items():
            for rank, doc in enumerate(sorted(docs, key=lambda d: -docs[d]), start=1):
                run.write(f"{qid} Q0 {doc} {rank} {1000 - rank} from-judgements\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, help="a BEIR folder")
    parser.add_argument("--split", default="test")
    parser.add_argument("--copies", type=int, nargs="+", default=[1])
    parser.add_argument("--work", default="runs/scoring-reads")
    args = parser.parse_args()
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    folder = Path(args.dataset).resolve()
    run = run_from_judgements(folder, args.split, work / "run.trec")
    columns = (("corpus", 24), ("reads", 16), ("documents", 10), ("seconds", 8), ("peak MiB", 9), ("nDCG@10", 8),
               ("R@100", 7))
    print(" ".join(f"{name:>{width}}" for name, width in columns))
    for copies in args.copies:
        data = padded_copy(folder, copies, work)
        size = (data / "corpus.jsonl").stat().st_size / 2**20
        rows = {}
        for how in ("whole dataset", "judgements only"):
            argv = [sys.executable, "-c", CHILD, f"beir:{data}:{args.split}", str(run), how]
            child = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=True)
            rows[how] = json.loads(child.stdout.strip().splitlines()[-1])
            r = rows[how]
            corpus = f"{folder.name} x{copies} ({size:.0f} MiB)"
            print(f"{corpus:>24} {how:>16} {r['documents']:>10} {r['seconds']:8.2f} {r['peak_mib']:9.0f} "
                  f"{r['nDCG@10']:8.4f} {r['R@100']:7.4f}")
        whole, alone = rows["whole dataset"], rows["judgements only"]
        assert (whole["nDCG@10"], whole["R@100"]) == (alone["nDCG@10"], alone["R@100"])
        seconds, memory = whole["seconds"] / alone["seconds"], whole["peak_mib"] / alone["peak_mib"]
        print(f"{'':>24} {'ratio':>16} {'':>10} {seconds:8.1f}x {memory:8.1f}x")


if __name__ == "__main__":
    main()
