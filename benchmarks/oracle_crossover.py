"""SIMULATION: at which reranker accuracy does GAREN lead each other method by a margin? From oracle sweeps.

Reads the summary.json of one or more ``oracle_sweep.py`` runs of one dataset (e.g. uniform and correlated noise,
each labelled ``LABEL=PATH``), takes each row's measured pairwise accuracy and the paired nDCG@10 differences
"GAREN - method" the sweep recorded, and prints, per noise model and method, the ranges of measured accuracy
(within the swept span) where GAREN's lead is at least ``--margin`` (linear interpolation between the swept
points; "never" when nowhere). It draws one figure: lead against accuracy, a line per
method, solid for the first summary, dashed for the next ones.

    python benchmarks/oracle_crossover.py uniform=runs/oracle-cranfield/summary.json \\
        correlated=runs/oracle-cranfield-rho0.5/summary.json --margin 0.02 --figure cranfield.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def leads(summary: dict, measure: str = "nDCG@10") -> dict[str, list[tuple[float, float, float]]]:
    """Method -> [(measured accuracy, mean lead, 95% half-width)] by accuracy, from the sweep's paired differences."""
    out: dict[str, list] = {}
    for row in summary["rows"]:
        for pair, diff in row["versus"].items():
            other = pair.split(" - ", 1)[1].split("[", 1)[0]
            out.setdefault(other, []).append((row["measured_pairwise_accuracy"], *diff[measure]))
    return {method: sorted(points) for method, points in out.items()}


def winning_ranges(points: list[tuple[float, float, float]], margin: float) -> str:
    """The measured accuracies (within the swept span) at which the lead is >= margin, as intervals, the lead
    interpolated linearly between swept points ("never" when none)."""
    ranges, start = [], None
    for i, (acc, lead, _) in enumerate(points):
        if i == 0:
            start = acc if lead >= margin else None
            continue
        acc0, lead0 = points[i - 1][:2]
        if (lead0 >= margin) != (lead >= margin):
            x = acc0 + (margin - lead0) * (acc - acc0) / (lead - lead0)
            if lead >= margin:
                start = x
            else:
                ranges.append((start, x))
                start = None
    if start is not None:
        ranges.append((start, points[-1][0]))
    return ", ".join(f"{a:.3f}-{b:.3f}" for a, b in ranges) or "never"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("summaries", nargs="+", metavar="LABEL=SUMMARY_JSON")
    ap.add_argument("--margin", type=float, default=0.02, help="the nDCG@10 lead asked of GAREN")
    ap.add_argument("--figure", help="where to draw the figure (png, svg or pdf)")
    ap.add_argument("--title", default="")
    args = ap.parse_args(argv)
    labelled = []
    for item in args.summaries:
        label, _, path = item.partition("=")
        if not path:
            print(f"oracle_crossover: error: '{item}' is not LABEL=SUMMARY_JSON", file=sys.stderr)
            return 2
        labelled.append((label, json.loads(Path(path).read_text())))
    print(f"SIMULATED rerankers (oracle); GAREN's nDCG@10 lead of {args.margin:g} from measured pairwise accuracy:")
    print(f"{'noise':12} {'method':10} {'lead >= margin at':>22}   lead at each swept accuracy")
    for label, summary in labelled:
        for method, points in leads(summary).items():
            swept = "  ".join(f"{acc:.3f}:{lead:+.3f}" for acc, lead, _ in points)
            print(f"{label:12} {method:10} {winning_ranges(points, args.margin):>22}   {swept}")
    if args.figure:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.5))
        colours = {}
        for k, (label, summary) in enumerate(labelled):
            for method, points in leads(summary).items():
                colour = colours.setdefault(method, f"C{len(colours)}")
                ax.errorbar([p[0] for p in points], [p[1] for p in points], yerr=[p[2] for p in points], color=colour,
                            linestyle="-" if k == 0 else "--", marker="o", capsize=2, label=f"vs {method} ({label})")
        ax.axhline(args.margin, color="grey", linewidth=0.8, linestyle=":")
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xlabel("reranker pairwise accuracy (measured, SIMULATED oracle)")
        ax.set_ylabel("GAREN nDCG@10 lead (paired mean, 95% CI)")
        ax.set_title(args.title or f"{labelled[0][1]['dataset']}, budget {labelled[0][1]['budget']} (SIMULATION)")
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(args.figure, dpi=120)
        print(f"figure: {args.figure}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
