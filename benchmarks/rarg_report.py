"""RARG figures from finished runs: nDCG@10 and R@10 of each run over its own queries, the agent's ledger per
query (turns, tool calls, refusals, tokens), and the share of queries the agent answered.

    python benchmarks/rarg_report.py --dataset beir:../shared/data/scifact:test RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import ir_measures

from garen_infer.data import load_dataset
from garen_infer.evaluation.evaluate import remove_excluded
from garen_infer.storage.trec import read_run

MEASURES = [ir_measures.parse_measure(m) for m in ("nDCG@10", "R@10")]


def per_query(run_dir: Path, dataset) -> tuple[list[dict], dict[str, dict[str, float]]]:
    records = [json.loads(line) for line in (run_dir / "trace.jsonl").read_text().splitlines()]
    qids = [r["qid"] for r in records]
    run = remove_excluded(read_run(run_dir / "run.trec"), dataset)
    qrels = {q: dataset.qrels[q] for q in qids}
    scores = {q: {str(m): 0.0 for m in MEASURES} for q in qids}  # a query with an empty ranking scores 0
    for metric in ir_measures.iter_calc(MEASURES, qrels, {q: run.get(q, {}) for q in qids}):
        scores[metric.query_id][str(metric.measure)] = float(metric.value)
    return records, scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    dataset = load_dataset(args.dataset)
    print("| run | queries | nDCG@10 | R@10 | turns/q | tool calls/q | refused/q | answered | input tokens/q "
          "| output tokens/q |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    details = []
    for run_dir in args.runs:
        records, scores = per_query(run_dir, dataset)
        n = len(records)
        mean = {str(m): sum(s[str(m)] for s in scores.values()) / n for m in MEASURES}
        agents = [r["trace"].get("agent") for r in records]
        ledger = [r["ledger"] for r in records]
        tokens_in = sum(cost["input_tokens"] for cost in ledger) / n
        tokens_out = sum(cost["output_tokens"] for cost in ledger) / n
        if all(agents):
            turns = sum(a["turns"] for a in agents) / n
            calls = sum(sum(a["tool_calls"].values()) for a in agents) / n
            refused = sum(a["refused"] for a in agents) / n
            answered = f"{sum(a['stop'] == 'answer' for a in agents)}/{n}"
            agent_cells = f"{turns:.1f} | {calls:.1f} | {refused:.1f} | {answered}"
            for r in records:
                a = r["trace"]["agent"]
                details.append(
                    f"| {run_dir.name} | {r['qid']} | {a['turns']} | {json.dumps(a['tool_calls'])} | {a['refused']} | "
                    f"{a['errors']} | {a['answered']} | {r['ledger']['input_tokens']} | "
                    f"{r['ledger']['output_tokens']} | {scores[r['qid']]['nDCG@10']:.3f} | {a['stop']} |"
                )
        else:
            agent_cells = "- | - | - | -"
        print(f"| {run_dir.name} | {n} | {mean['nDCG@10']:.4f} | {mean['R@10']:.4f} | {agent_cells} | "
              f"{tokens_in:.0f} | {tokens_out:.0f} |")
    if details:
        print("\n| run | query | turns | tool calls | refused | errors | docs answered | input tokens | "
              "output tokens | nDCG@10 | stop |")
        print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|")
        print("\n".join(details))


if __name__ == "__main__":
    main()
