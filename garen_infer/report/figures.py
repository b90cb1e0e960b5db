"""The report's plots as PNG files, and the same figures as PDF or SVG for a paper (matplotlib, Agg backend: no
display needed). Each function draws one figure from a DatasetMatrix and returns its caption, which says exactly
what the axes show.

The figures drop into a two-column paper as they are: one panel is a column wide (3.33 in, ACM and IEEE) and several
panels a page wide (7 in), saved at that size (no tight cropping); text is 7-8 pt at that size; no title inside
(the caption is the paper's); PDFs embed TrueType (Type 42) fonts, since ACM's and IEEE's checks reject Type 3."""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the backend is chosen before pyplot loads

from garen_infer.report.matrix import DatasetMatrix, gold_distances
from garen_infer.storage.atomic import atomic_path

if TYPE_CHECKING:
    from matplotlib.artist import Artist

DPI = 300  # the PNG at print resolution, since its size is the paper's
COLUMN_WIDTH, PAGE_WIDTH = 3.33, 7.0  # inches: one column and the full text width of ACM sigconf and IEEEtran
PANEL_HEIGHT = 2.3
PAPER_STYLE = {"pdf.fonttype": 42, "ps.fonttype": 42, "font.size": 8, "axes.labelsize": 8, "axes.titlesize": 8,
               "xtick.labelsize": 7, "ytick.labelsize": 7, "legend.fontsize": 7, "lines.markersize": 4,
               "figure.constrained_layout.use": True}
MEASURE_NAMES = {"nDCG@10": "nDCG@10", "R@100": "R@100 (observed documents)"}


MARKERS = "osD^vPX*hp"


def paper_style(draw):
    """Draw (and save) in the paper style: the sizes apply when text is created, the font type when it is saved."""
    @functools.wraps(draw)
    def drawn(*args, **kwargs):
        with plt.rc_context(PAPER_STYLE):
            return draw(*args, **kwargs)
    return drawn


def figure(panels: int = 1, height: float = PANEL_HEIGHT, **kwargs):
    """A figure a column wide for one panel, a page wide for more."""
    return plt.subplots(1, panels, figsize=(COLUMN_WIDTH if panels == 1 else PAGE_WIDTH, height),
                        squeeze=False, **kwargs)


def styles(labels: list[str]) -> dict[str, dict]:
    """One colour and marker per method label, the same in every figure of a report; later labels draw smaller
    markers and thinner lines, so methods with identical numbers stay visible on top of each other."""
    palette = plt.get_cmap("tab10" if len(labels) <= 10 else "tab20")
    return {label: {"color": palette(i % palette.N), "marker": MARKERS[i % len(MARKERS)],
                    "markersize": max(2.5, 5.0 - 0.4 * i), "linewidth": max(0.7, 1.6 - 0.15 * i)}
            for i, label in enumerate(labels)}


def save(fig, path: Path, formats=("png",)) -> Path:
    """``path`` as PNG, and beside it the same figure in every other format named (``pdf``, ``svg``: vector)."""
    # no dates, and SVG element ids from a fixed salt (else random): the same numbers give the same files
    metadata = {"png": {"Software": None}, "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
                "svg": {"Date": None}}
    style: Any = {**PAPER_STYLE, "svg.hashsalt": "garen-report"}  # matplotlib's stubs type rc names as Literals
    try:
        for fmt in dict.fromkeys(["png", *formats]):
            with atomic_path(path.with_suffix(f".{fmt}")) as tmp, plt.rc_context(style):
                fig.savefig(tmp, format=fmt, dpi=DPI, metadata=metadata[fmt])  # the drawn size: no tight crop
    finally:
        plt.close(fig)
    return path


@paper_style
def accuracy_vs_budget(matrix: DatasetMatrix, path: Path, formats=("png",)) -> str | None:
    """Each measure against the reranking budget, one line per method; methods without a budget are flat. With one
    budget there is nothing to draw a line through: one point per method instead."""
    if not matrix.cells:
        return None
    if len(matrix.budgets) <= 1:
        return _accuracy_at_one_budget(matrix, path, formats)
    style = styles(matrix.labels)
    fig, axes = figure(len(matrix.measures))
    for ax, measure in zip(axes[0], matrix.measures):
        for label in matrix.labels:
            row = sorted(matrix.row(label), key=lambda c: c.budget or 0)
            if not row:
                continue
            if row[0].budget is None:
                ax.axhline(row[0].mean(measure), color=style[label]["color"], linestyle="--", linewidth=1.0,
                           label=f"{label} (no budget)")
            else:
                ax.plot([c.budget for c in row], [c.mean(measure) for c in row], label=label, **style[label])
        ax.set_xlabel("reranking budget k")
        ax.set_ylabel(MEASURE_NAMES.get(measure, measure))
        ax.set_xticks(matrix.budgets)
        ax.grid(alpha=0.3)
    axes[0][0].legend(loc="best")
    save(fig, path, formats)
    return (f"{matrix.name}: {_panels(matrix.measures)} against the reranking budget k (Reranker@k: distinct documents "
            f"the reranker sees), one line per method; dashed lines are methods without a budget.")


@paper_style
def _accuracy_at_one_budget(matrix: DatasetMatrix, path: Path, formats) -> str:
    """One point per method and measure, methods along the x axis: a single budget is no curve."""
    style = styles(matrix.labels)
    labels = [label for label in matrix.labels if matrix.row(label)]
    fig, axes = figure(len(matrix.measures))
    for ax, measure in zip(axes[0], matrix.measures):
        for x, label in enumerate(labels):
            cell = matrix.row(label)[0]
            ax.plot([x], [cell.mean(measure)], linestyle="none",
                    label=label if cell.budget is not None else f"{label} (no budget)",
                    **{k: v for k, v in style[label].items() if k != "linewidth"})
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30, ha="right")
        ax.set_ylabel(MEASURE_NAMES.get(measure, measure))
        ax.grid(alpha=0.3, axis="y")
    at = f"budget {matrix.budgets[0]}" if matrix.budgets else "their one setting (no method here has a budget)"
    save(fig, path, formats)
    return f"{matrix.name}: {_panels(matrix.measures)} of each method at {at} (one point per method: a single budget)."


def _panels(measures) -> str:
    if len(measures) == 1:
        return measures[0]
    sides = ["left", "right"] if len(measures) == 2 else [f"panel {i + 1}" for i in range(len(measures))]
    return ", ".join(f"{m} ({side})" for m, side in zip(measures, sides))


@paper_style
def accuracy_vs_cost(matrix: DatasetMatrix, path: Path, formats=("png",)) -> str | None:
    """The first measure (nDCG@10) against model calls, model seconds and (when priced) dollars per query, like
    GAREN Fig. 6."""
    measure = matrix.measures[0]
    if not any(c.cost.get("requests") is not None for c in matrix.cells):
        return None
    axes_spec = [("requests", "model calls per query"), ("model_seconds", "model seconds per query")]
    if any(c.cost.get("dollars") for c in matrix.cells):
        axes_spec.append(("dollars", "dollars per query"))
    style = styles(matrix.labels)
    fig, axes = figure(len(axes_spec))
    for ax, (key, xlabel) in zip(axes[0], axes_spec):
        for label in matrix.labels:
            row = sorted((c for c in matrix.row(label) if c.cost.get(key) is not None), key=lambda c: c.budget or 0)
            if not row:
                continue
            xs, ys = [c.cost[key] for c in row], [c.mean(measure) for c in row]
            ax.plot(xs, ys, label=label, **style[label], **({"linestyle": "none"} if len(row) == 1 else {}))
            for c, x, y in zip(row, xs, ys):
                if c.budget is not None:
                    ax.annotate(str(c.budget), (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7,
                                color=style[label]["color"])
        positive = [c.cost[key] for c in matrix.cells if c.cost.get(key)]
        if positive and max(positive) / min(positive) > 20:  # costs spread over decades: log scale, 0 kept on it
            ax.set_xscale("symlog", linthresh=10 ** math.floor(math.log10(min(positive))), linscale=0.6)
            xlabel += " (log)"
        ax.set_xlabel(xlabel)
        ax.set_ylabel(measure)
        ax.grid(alpha=0.3)
    axes[0][0].legend(loc="best")
    save(fig, path, formats)
    what = ", ".join(x for _, x in axes_spec)
    return (
        f"{matrix.name}: {measure} against {what} (model calls of all roles, cache hits included; dollars estimated "
        f"from tokens); one line per method through its budgets, points labelled with their budget."
    )


@paper_style
def reachability(matrix: DatasetMatrix, path: Path, formats=("png",)) -> str | None:
    """Hit@100 by hop distance from the first-stage top 20 to the nearest gold document (GAREN Fig. 4 and 8)."""
    columns: list[int | None] = [*matrix.budgets] or [None]
    if not any(c.reach for c in matrix.cells):
        return None
    style = styles(matrix.labels)
    fig, axes = figure(len(columns), sharey=True)
    for ax, budget in zip(axes[0], columns):
        found = (matrix.cell(label, budget) for label in matrix.labels)
        cells = [c for c in found if c is not None and c.reach]
        hops = sorted({h for c in cells for h in c.reach}, key=lambda h: (h == "none", int(h) if h != "none" else 0))
        width = 0.8 / max(len(cells), 1)
        for i, c in enumerate(cells):
            xs = [j + (i - (len(cells) - 1) / 2) * width for j in range(len(hops))]
            ax.bar(xs, [c.reach.get(h, {}).get("hit@100", 0.0) for h in hops], width=width,
                   color=style[c.label]["color"], label=c.label)
        counts = {h: max(c.reach.get(h, {}).get("queries", 0) for c in cells) for h in hops}
        ax.set_xticks(range(len(hops)))
        ax.set_xticklabels([f"{'>10' if h == 'none' else h}\n(n={counts[h]})" for h in hops])
        ax.set_title("no budget" if budget is None else f"budget {budget}")
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("Hit@100")
    handles: dict[str, Artist] = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(handles.values(), handles.keys(), loc="outside right center")
    fig.supxlabel("minimum k-NN hops from the first-stage top 20 to a gold document", fontsize=8)
    save(fig, path, formats)
    return (
        f"{matrix.name}: Hit@100 (a gold document among the first 100) of each method by the minimum number of k-NN "
        "graph hops from the first-stage top 20 to a gold document (GAREN Fig. 4/8), over the queries "
        f"with no gold document in that top 20; n = queries at that distance; '>10' = not reached within 10 hops."
    )


@paper_style
def gold_distance(matrix: DatasetMatrix, path: Path, formats=("png",)) -> str | None:
    """GAREN App. C.1 Fig. 9: minimum hops to a gold document on the document graph and on the group graph."""
    cell = next((c for c in matrix.cells if gold_distances(c)), None)
    if cell is None:
        return None
    distances = gold_distances(cell)
    assert distances is not None  # the cell was picked for having them
    keys = sorted({("none" if d is None else d) for ds in distances.values() for d in ds},
                  key=lambda h: (h == "none", 0 if h == "none" else h))
    fig, axes = figure()
    ax = axes[0][0]
    width = 0.4
    for i, (graph, values) in enumerate(distances.items()):
        counts = [sum(1 for d in values if ("none" if d is None else d) == k) for k in keys]
        ax.bar([j + (i - 0.5) * width for j in range(len(keys))], counts, width=width, label=graph)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([">10" if k == "none" else str(k) for k in keys])
    ax.set_xlabel("minimum hops from the first window to a gold document")
    ax.set_ylabel("queries")
    ax.legend()
    ax.grid(alpha=0.3, axis="y")
    n = len(next(iter(distances.values())))
    save(fig, path, formats)
    return (f"{matrix.name}: for the {n} queries with no gold document in GAREN's first window, the minimum "
            "hops to a gold document on the k-NN document graph and on the group graph (GAREN App. C.1, Fig. "
            f"9), from the run {cell.name}.")
