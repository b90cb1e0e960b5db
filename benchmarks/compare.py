"""Before/after table of two benchmark folders (benchmarks/fidelity.sh outputs), as markdown:
python benchmarks/compare.py BEFORE_DIR AFTER_DIR"""

from __future__ import annotations

import json
import sys
from pathlib import Path

COLUMNS = [("nDCG@10", "nDCG@10", "{:.4f}"), ("R@100", "R@100", "{:.4f}"), ("budget/q", "mean_budget_used", "{:.1f}"),
           ("requests/q", "mean_requests", "{:.1f}")]


def load(folder: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted((folder / "runs").glob("*/metrics.json"))}


def main(before_dir: str, after_dir: str) -> None:
    before, after = load(Path(before_dir)), load(Path(after_dir))
    head = ["run"] + [f"{name} before | {name} after" for name, _, _ in COLUMNS]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * (1 + 2 * len(COLUMNS)))
    for run in sorted(set(before) | set(after)):
        cells = [run]
        for _, key, fmt in COLUMNS:
            for side in (before, after):
                value = side.get(run, {}).get(key)
                cells.append("-" if value is None else fmt.format(value))
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(*sys.argv[1:3])
