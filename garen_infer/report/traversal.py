"""A case study of how GAREN runs traverse the corpus for one query (GAREN sec. 6.5, Fig. 5): the first window,
the groups each run selected at each iteration, and the gold documents, on a 2-D projection of the embeddings.

The query shown is the one whose gold documents lie farthest (k-NN hops) from the first window among those that
some run reached, so the figure shows expansion doing its work; ties go to the first query id. The projection is
a PCA fitted on the documents drawn (plus a fixed sample of the corpus for context), so it works on any corpus size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from garen_infer.report.matrix import Cell, DatasetMatrix
from garen_infer.report.run_results import ranking_rows

if TYPE_CHECKING:
    from matplotlib.artist import Artist

    from garen_infer.data.dataset import Dataset
    from garen_infer.index.folder import IndexFolder


MAX_PANELS = 6
COLUMNS = 3
CONTEXT_SAMPLE = 2000  # corpus documents drawn in grey around the traversal
HITS_AT = 100


def garen_cells(matrix: DatasetMatrix) -> list[Cell]:
    """The runs with per-iteration group selections (GAREN and its ablations), at the smallest budget they share."""
    cells = [
        c
        for c in matrix.cells
        if any(r.get("trace", {}).get("iterations") and "gold" in r["trace"] for r in c.run.records.values())
    ]
    cells = [c for c in cells if (c.run.config.get("method_options") or {}).get("expansion_unit", "group") == "group"]
    if not cells:
        return []
    budget = min(c.budget or 0 for c in cells)
    return [c for c in cells if (c.budget or 0) == budget][:MAX_PANELS]


def pick_query(cells: list[Cell], dataset: Dataset) -> tuple[str, bool] | None:
    """(query id, whether some run reached a gold document of it)."""
    best = None
    for qid in sorted(set.intersection(*(set(c.run.records) for c in cells))):
        gold = _gold(dataset, qid)
        hops = cells[0].run.records[qid]["trace"]["gold"].get("min_hops_doc_graph")
        if not gold or hops is None or hops < 1:
            continue
        reached = any(gold & set(ranking_rows(c.run.records[qid], dataset)[:HITS_AT]) for c in cells)
        key = (reached, hops)
        if best is None or key > best[0]:
            best = (key, qid)
    return (best[1], best[0][0]) if best else None


def _gold(dataset: Dataset, qid: str) -> set[int]:
    return {dataset.doc_index[d] for d, rel in dataset.qrels.get(qid, {}).items() if rel > 0 and d in dataset.doc_index}


def traversal(matrix: DatasetMatrix, dataset: Dataset, index: IndexFolder, first_stage_rows, path,
              formats=("png",)) -> str | None:
    from garen_infer.report.figures import paper_style

    return paper_style(_traversal)(matrix, dataset, index, first_stage_rows, path, formats)


def _traversal(matrix: DatasetMatrix, dataset: Dataset, index: IndexFolder, first_stage_rows, path,
               formats) -> str | None:
    from garen_infer.report.figures import COLUMN_WIDTH, PAGE_WIDTH, plt, save

    cells = garen_cells(matrix)
    if not cells or index is None or not index.has("embeddings"):
        return None
    picked = pick_query(cells, dataset)
    if picked is None:
        return None
    qid, reached = picked
    window = int((cells[0].run.config.get("method_options") or {}).get("window", 20))
    start = first_stage_rows(cells[0].run.config.get("first_stage") or {}).get(qid, [])[:window]
    gold = _gold(dataset, qid)
    panels = []
    for cell in cells:
        groups = index.groups((cell.run.config.get("method_options") or {}).get("groups", "groups"))
        steps = cell.run.records[qid]["trace"]["iterations"]
        selected: dict[int, int] = {}
        for step in steps:
            for g in step["selected"]:
                selected.setdefault(g, step["t"])  # the iteration that first expanded the group
        panels.append((cell, groups, selected, steps))
    drawn = set(start) | gold | {d for _, groups, selected, _ in panels for g in selected for d in groups.members[g]}
    rng = np.random.default_rng(0)
    n = len(index.doc_ids)
    context = rng.choice(n, size=min(CONTEXT_SAMPLE, n), replace=False)
    rows = sorted(drawn | set(context.tolist()))
    vectors = np.asarray(index.embeddings[rows], dtype=np.float64)
    centred = vectors - vectors.mean(axis=0)
    _, _, components = np.linalg.svd(centred, full_matrices=False)
    xy = dict(zip(rows, centred @ components[:2].T))
    iterations = max((s["t"] for *_, steps in panels for s in steps), default=1)
    colour, norm = plt.get_cmap("viridis"), plt.Normalize(1, max(iterations, 2))

    columns = min(COLUMNS, len(panels))
    grid_rows = -(-len(panels) // columns)
    width = COLUMN_WIDTH if columns == 1 else PAGE_WIDTH
    fig, axes = plt.subplots(grid_rows, columns, figsize=(width, (width / columns) * 0.95 * grid_rows),
                             squeeze=False, sharex=True, sharey=True)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (cell, groups, selected, _steps) in zip(axes.flat, panels):
        ctx = np.array([xy[r] for r in context])
        ax.scatter(ctx[:, 0], ctx[:, 1], s=3, color="0.85", zorder=0)
        for g, t in sorted(selected.items(), key=lambda kv: kv[1]):
            points = np.array([xy[d] for d in groups.members[g]])
            ax.scatter(points[:, 0], points[:, 1], s=9, color=colour(norm(t)), zorder=1)
        first = np.array([xy[d] for d in start]) if start else np.zeros((0, 2))
        ax.scatter(first[:, 0], first[:, 1], marker="x", s=12, color="black", zorder=2,
                   label=f"first-stage top {window}")
        ranked = set(ranking_rows(cell.run.records[qid], dataset)[:HITS_AT])
        for d in sorted(gold):
            found = d in ranked
            ax.scatter(*xy[d], marker="*", s=80, zorder=3, edgecolors="red", linewidths=1.0,
                       facecolors="red" if found else "none", label="gold (found)" if found else "gold (not found)")
        hit = bool(gold & ranked)
        ax.set_title(f"{cell.name}: {len(selected)} groups, Hit@{HITS_AT} {'yes' if hit else 'no'}")  # a panel label
        ax.set_xticks([])
        ax.set_yticks([])
        handles: dict[str, Artist] = {}
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
        ax.legend(handles.values(), handles.keys(), loc="lower right")
    from matplotlib.ticker import MaxNLocator

    bar = fig.colorbar(plt.cm.ScalarMappable(cmap=colour, norm=norm), ax=axes.ravel().tolist(),
                       label="iteration that expanded the group", shrink=0.8)
    bar.locator = MaxNLocator(integer=True)
    bar.update_ticks()
    hops = cells[0].run.records[qid]["trace"]["gold"]["min_hops_doc_graph"]
    at = "" if cells[0].budget is None else f" at budget {cells[0].budget}"
    save(fig, path, formats)
    return (
        f"{matrix.name}: how each GAREN run{at} (the smallest budget they share) traversed the corpus for query "
        f"{qid} (GAREN Fig. 5): the documents of "
        f"every group it expanded, coloured by the iteration that first expanded the group; crosses are the "
        f"first-stage top {window}, stars the gold documents (filled: among the run's first {HITS_AT}); grey is a "
        f"sample of the corpus. 2-D PCA of the index embeddings. The query is the one whose gold lies farthest "
        f"from the first window ({hops} hops) "
        + ("among those a run reached." if reached else "(no run reached the gold of any such query).")
        + reliability_line(matrix.cells, qid)
    )


def reliability_line(cells: list[Cell], qid: str) -> str:
    """The navigator's reliability each GAREN run of the dataset measured, at every budget
    (methods/garen_adaptive.py): the mean over its queries of the final Spearman rho, and the pictured
    query's; empty where no run measured one (too few judged groups, or runs made before it was recorded)."""
    parts = []
    for cell in cells:
        rhos = {q: (r.get("trace", {}).get("navigator_reliability") or {}).get("rho")
                for q, r in cell.run.records.items()}
        known = [rho for rho in rhos.values() if rho is not None]
        if known:
            this = "n/a" if rhos.get(qid) is None else f"{rhos[qid]:.2f}"
            parts.append(f"{cell.name} {np.mean(known):.2f} over {len(known)} queries ({this})")
    if not parts:
        return ""
    return (" Navigator reliability (Spearman rho between the navigator's group scores and the best reranked "
            "rank of each group's members; mean over the queries with at least 3 such groups, this query's in "
            "brackets): "
            + "; ".join(parts) + ".")
