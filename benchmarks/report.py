"""Print a table of metrics.json files: python benchmarks/report.py runs/*/metrics.json"""

from __future__ import annotations

import json
import sys
from pathlib import Path

COLUMNS = [("nDCG@10", "nDCG@10", "{:.4f}"), ("R@100", "R@100", "{:.4f}"), ("budget", "mean_budget_used", "{:.1f}"),
           ("requests/q", "mean_requests", "{:.1f}"), ("rerank calls/q", None, "{:.1f}"),
           ("model calls/q", "mean_model_calls", "{:.1f}"),
           ("in tokens/q", "mean_input_tokens", "{:.0f}"), ("out tokens/q", "mean_output_tokens", "{:.0f}"),
           ("s/query", "wall_seconds_per_query", "{:.3f}")]


def row(path: Path) -> list[str]:
    metrics = json.loads(path.read_text())
    cells = [path.parent.name + (" [SIMULATED]" if "simulation" in metrics else "")]  # oracle runs: never model results
    for _, key, fmt in COLUMNS:
        if key is None:  # reranker calls from the per-query ledgers
            lines = (path.parent / "trace.jsonl").read_text().splitlines()
            calls = [json.loads(line)["ledger"]["roles"].get("reranker", {}).get("requests", 0) for line in lines]
            cells.append(fmt.format(sum(calls) / max(len(calls), 1)))
        else:
            value = metrics.get(key)
            cells.append("-" if value is None else fmt.format(value))
    return cells


def main(paths: list[str]) -> None:
    rows = [["run"] + [c[0] for c in COLUMNS]] + [row(Path(p)) for p in sorted(paths)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)))
    notices = {json.loads(Path(p).read_text()).get("simulation", {}).get("notice") for p in paths} - {None}
    for notice in sorted(notices):
        print(f"[SIMULATED] rows: {notice}")


if __name__ == "__main__":
    main(sys.argv[1:])
