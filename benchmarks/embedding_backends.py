"""CPU embedding backends side by side: speed, memory, agreement with torch, and dense retrieval nDCG@10.

    HF_HUB_OFFLINE=1 python benchmarks/embedding_backends.py --data ../shared/data     # --sample 256, --rows ...

Every row runs in a fresh process, one after another on the same machine in the same run, so ratios between rows
are what to read (absolute rates move with the machine's load, printed at the start and the end). Each row:

* passages/s (wall clock) and passages per CPU-second (all the row's threads; steadier when other work shares the
  machine, and the figure to read with ``--parallel``): the first ``--sample`` SciFact passages encoded as the
  index stage encodes them (title + text,
  ``Embedder.encode_documents``), timed after the model is loaded and warmed on one batch;
* peak RSS: the row's process, model load included (ONNX exports are made before the rows, in their own process);
* quality rows also encode both corpora in full and their queries, then report the cosine of each document vector
  with torch's (mean, min) and nDCG@10 of exact dense retrieval (inner product, top 10) on SciFact and Cranfield.

Rows: ``torch`` (the default: sentence-transformers, batch 32, length-sorted batches inside ``encode``), torch with
1 thread and with batch 64 (128 on request), torch without length sorting (batches in corpus order: what the
sorting saves),
``onnx`` and ``openvino`` in fp32 and int8 (llm/runtime_encoders.py: an ONNX export of the same local weights), and
``openvino-bf16`` (bfloat16 compute where the CPU has AMX or AVX512_BF16; f32 elsewhere), also at batch 64.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROWS = {  # name -> (EmbeddingParams overrides, quality row, encode in corpus order); quality rows run first
    "torch": ({}, True, False),
    "onnx-int8": ({"backend": "onnx", "quantization": "int8"}, True, False),
    "openvino-int8": ({"backend": "openvino", "quantization": "int8"}, True, False),
    "onnx": ({"backend": "onnx"}, True, False),
    "openvino": ({"backend": "openvino"}, True, False),
    "openvino-bf16": ({"backend": "openvino", "precision": "bf16"}, True, False),
    "openvino-bf16-b64": ({"backend": "openvino", "precision": "bf16", "batch_size": 64}, False, False),
    "torch-unsorted": ({}, False, True),
    "torch-1-thread": ({"threads": 1}, False, False),
    "torch-batch-64": ({"batch_size": 64}, False, False),
    "torch-batch-128": ({"batch_size": 128}, False, False),
}
DEFAULT_ROWS = [row for row in ROWS if row != "torch-batch-128"]
DATASETS = ("scifact", "cranfield")


def load(data: Path, name: str, limit: int = 0):
    """A BEIR dataset; with ``limit``, its corpus cut to the documents judged for its queries and the first others,
    ``limit`` in all (nDCG@10 on a smaller corpus: higher than on the whole, the same for every row)."""
    from garen_infer.data.beir import load_beir
    from garen_infer.data.dataset import Dataset

    dataset = load_beir(data / name, allow_empty_docs=True)  # Cranfield holds empty documents
    if not limit or limit >= len(dataset.documents):
        return dataset
    judged = {d for rels in dataset.qrels.values() for d in rels}
    others = [d.id for d in dataset.documents if d.id not in judged][: max(0, limit - len(judged))]
    kept = judged | set(others)
    return Dataset(dataset.name, [d for d in dataset.documents if d.id in kept], dataset.queries, dataset.qrels)


def child(args) -> None:
    """One row, in its own process: writes its figures to stdout as JSON and its vectors under ``--work``."""
    from garen_infer.llm.embeddings import Embedder, EmbeddingParams

    overrides, quality, unsorted = ROWS[args.row]
    embedder = Embedder(EmbeddingParams(**overrides))
    scifact = load(args.data, "scifact", args.scifact_docs)
    sample = [d.full_text for d in scifact.documents[: args.sample]]
    embedder.encode_documents(sample[: embedder.params.batch_size], show_progress=False)  # warm: first-call costs
    start, cpu = time.perf_counter(), time.process_time()
    if unsorted:  # one encode call per batch, in corpus order: each batch pads to its own longest passage
        size = embedder.params.batch_size
        for first in range(0, len(sample), size):
            embedder.encode_documents(sample[first : first + size], show_progress=False)
    else:
        timed = embedder.encode_documents(sample, show_progress=False)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    out = {"row": args.row, "passages": len(sample), "seconds": round(seconds, 2), "rate": len(sample) / seconds,
           "cpu_rate": len(sample) / cpu}  # passages per CPU-second, all threads: steadier on a loaded machine
    if quality:  # SciFact's first passages are the timed sample: encoded once
        for name in DATASETS:
            dataset = scifact if name == "scifact" else load(args.data, name, args.cranfield_docs)
            texts = [d.full_text for d in dataset.documents]
            docs = embedder.encode_documents(texts[len(sample) :] if name == "scifact" else texts, show_progress=False)
            if name == "scifact":
                docs = np.concatenate([timed, docs]) if len(docs) else timed
            queries = embedder.encode_queries([q.text for q in dataset.queries])
            np.save(args.work / f"{args.row}.{name}.docs.npy", docs)
            np.save(args.work / f"{args.row}.{name}.queries.npy", queries)
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def ndcg10(dataset, docs: np.ndarray, queries: np.ndarray) -> float:
    from garen_infer.evaluation.evaluate import evaluate

    scores = queries @ docs.T
    top = np.argsort(-scores, axis=1)[:, :10]
    ids = [d.id for d in dataset.documents]
    run = {q.id: {ids[j]: float(scores[i, j]) for j in top[i]} for i, q in enumerate(dataset.queries)}
    return evaluate(run, dataset, measures=("nDCG@10",))["nDCG@10"]


def quality(work: Path, data: Path, row: str, limits: dict[str, int]) -> dict:
    figures = {}
    cosines = []
    for name in DATASETS:
        dataset = load(data, name, limits[name])
        docs, queries = np.load(work / f"{row}.{name}.docs.npy"), np.load(work / f"{row}.{name}.queries.npy")
        reference = np.load(work / f"torch.{name}.docs.npy")
        cosines.append(np.sum(docs * reference, axis=1))
        figures[f"ndcg10_{name}"] = ndcg10(dataset, docs, queries)
    every = np.concatenate(cosines)
    return {**figures, "cos_mean": float(every.mean()), "cos_min": float(every.min())}


def run_row(args, row: str, warm: bool = False) -> dict | None:
    command = [sys.executable, __file__, "--child", row, "--data", str(args.data), "--work", str(args.work),
               "--sample", str(1 if warm else args.sample), "--scifact-docs", str(args.scifact_docs),
               "--cranfield-docs", str(args.cranfield_docs)]
    if warm:
        command.append("--warm")
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if done.returncode != 0:
        print(f"{row}: failed\n{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ''}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def table(results: list[dict], scifact_docs: int, cranfield_docs: int) -> str:
    base = next((r for r in results if r["row"] == "torch"), None)
    lines = [f"{'row':16} {'passages/s':>10} {'x torch':>8} {'per CPU-s':>9} {'x torch':>8} {'RSS MB':>7} "
             f"{'cos mean':>9} {'cos min':>8} {'nDCG@10 scifact' + (f'-{scifact_docs}' if scifact_docs else ''):>20} "
             f"{'nDCG@10 cranfield' + (f'-{cranfield_docs}' if cranfield_docs else ''):>22}"]
    for r in results:
        q = [f"{r[k]:.4f}" if k in r else "-" for k in ("cos_mean", "cos_min", "ndcg10_scifact", "ndcg10_cranfield")]
        ratio = f"{r['rate'] / base['rate']:.2f}" if base else "-"
        cpu_ratio = f"{r['cpu_rate'] / base['cpu_rate']:.2f}" if base else "-"
        lines.append(f"{r['row']:16} {r['rate']:10.1f} {ratio:>8} {r['cpu_rate']:9.1f} {cpu_ratio:>8} "
                     f"{r['rss_mb']:7.0f} {q[0]:>9} {q[1]:>8} "
                     f"{q[2]:>20} {q[3]:>22}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"),
                        help="holds scifact/ and cranfield/ (BEIR)")
    parser.add_argument("--sample", type=int, default=256, help="SciFact passages timed per row")
    parser.add_argument("--scifact-docs", type=int, default=0,
                        help="SciFact's corpus cut to its judged documents and the first others, this many (0: all)")
    parser.add_argument("--cranfield-docs", type=int, default=0, help="the same for Cranfield")
    parser.add_argument("--rows", nargs="+", default=DEFAULT_ROWS, choices=list(ROWS))
    parser.add_argument("--work", type=Path, default=None, help="where the rows' vectors go (default: a temp folder)")
    parser.add_argument("--exported", action="store_true", help="the ONNX exports are made already: no warm-up")
    parser.add_argument("--parallel", type=int, default=1, help="rows run at once (1: one after another)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.row = args.child
        if args.warm:  # make the ONNX export (and int8 copy) so no row's time or memory includes it
            from garen_infer.llm.embeddings import Embedder, EmbeddingParams

            Embedder(EmbeddingParams(**ROWS[args.row][0])).encode_documents(["warm"], show_progress=False)
            print(json.dumps({"row": args.row}))
            return
        child(args)
        return
    args.work = args.work or Path(tempfile.mkdtemp(prefix="embedding-backends."))
    args.work.mkdir(parents=True, exist_ok=True)
    rows = ["torch", *[r for r in args.rows if r != "torch"]]  # torch first: the reference of every cosine
    print(f"load at start: {uptime()}", flush=True)
    if not args.exported:
        rows = [row for row in rows if not ROWS[row][0].get("backend") or run_row(args, row, warm=True) is not None]
    if args.parallel > 1:  # rows side by side: for a machine too loaded to run them in turn (read cpu_rate then)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(args.parallel) as pool:
            found = dict(zip(rows, pool.map(lambda row: run_row(args, row), rows)))
    else:
        found = {row: run_row(args, row) for row in rows}
    results = []
    for row in rows:
        result = found[row]
        if result is None:
            continue
        if ROWS[row][1] and found["torch"] is not None:
            result.update(quality(args.work, args.data, row,
                                  {"scifact": args.scifact_docs, "cranfield": args.cranfield_docs}))
        results.append(result)
        print(json.dumps(result), flush=True)
    print(f"load at end: {uptime()}")
    print(table(results, args.scifact_docs, args.cranfield_docs))
    if args.json:
        args.json.write_text(json.dumps({"results": results}, indent=2))


if __name__ == "__main__":
    main()
