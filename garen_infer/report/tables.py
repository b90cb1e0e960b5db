"""The report's tables, modelled on the GAREN paper: accuracy by method and budget with the best in bold, the second
underlined and significance against the baseline marked (Tables 1-3), cost per query by role (Table 7),
paired comparisons with the baseline, and Hit@100 by hop distance (Fig. 4 as numbers)."""

from __future__ import annotations

import math

from garen_infer.report.document import Cell, Table
from garen_infer.report.matrix import DatasetMatrix

BETTER, WORSE = "▲", "▼"


def _column_label(budget) -> str:
    return "no budget" if budget is None else f"@{budget}"


def accuracy_table(matrix: DatasetMatrix, measure: str, alpha: float) -> Table:
    """Rows: methods; columns: budgets; a method without a budget repeats its one run in every column."""
    columns = matrix.budgets or [None]
    values = {(label, b): matrix.cell(label, b) for label in matrix.labels for b in columns}
    ranks = {}
    for b in columns:
        ordered = sorted({round(c.mean(measure), 4) for (l, bb), c in values.items() if bb == b and c is not None}, reverse=True)
        ranks[b] = ordered[:2]
    rows = []
    for label in matrix.labels:
        if not matrix.row(label):
            continue
        no_budget = matrix.row(label)[0].budget is None
        row: list = [label + (" (no budget)" if no_budget and matrix.budgets else "")]
        for b in columns:
            cell = values[(label, b)]
            if cell is None:
                row.append(Cell("—"))
                continue
            value = round(cell.mean(measure), 4)
            mark = _mark(cell.versus.get(b, {}).get(measure), alpha)
            row.append(Cell(f"{value:.4f}{mark}", bold=value == ranks[b][0], underline=len(ranks[b]) > 1 and value == ranks[b][1]))
        rows.append(row)
    baseline = f" {BETTER}/{WORSE}: significantly above/below {matrix.baseline} at the same budget (paired t-test, p < {alpha})." if matrix.baseline else ""
    return Table(["method", *(_column_label(b) for b in columns)], rows,
                 f"{measure} on {matrix.name} ({matrix.queries_text()}). Best per column in bold, second underlined.{baseline}")


def _mark(comparison, alpha: float) -> str:
    if comparison is None or comparison.t_test_p is None or math.isnan(comparison.t_test_p) or comparison.t_test_p >= alpha:
        return ""
    return BETTER if comparison.difference > 0 else WORSE


def _number(value, digits: int) -> Cell:
    if value is None:
        return Cell("—")
    return Cell(f"{value:,.{digits}f}")


def cost_table(matrix: DatasetMatrix) -> Table:
    """Per cell: accuracy and mean cost per query, then one indented line per model role (Table 7's layout)."""
    rows = []
    priced = any("dollars" in c.cost for c in matrix.cells)
    for cell in sorted(matrix.cells, key=lambda c: (c.budget is not None, c.budget or 0, matrix.labels.index(c.label))):
        cost = cell.cost
        dollars = [_number(cost.get("dollars"), 5)] if priced else []
        rows.append([cell.label, "—" if cell.budget is None else str(cell.budget), _number(cell.mean("nDCG@10"), 4),
                     _number(cell.mean("R@100"), 4), _number(cost["requests"], 1), _number(cost["input_tokens"], 0),
                     _number(cost["output_tokens"], 0), _number(cost["model_seconds"], 3), _number(cost.get("wall_seconds"), 3), *dollars])
        for role, rc in cost["roles"].items():
            role_dollars = [_number(rc.get("dollars"), 5)] if priced else []
            rows.append([f"  ↳ {role}", "", Cell(""), Cell(""), _number(rc["requests"], 1), _number(rc["input_tokens"], 0),
                         _number(rc["output_tokens"], 0), _number(rc["seconds"], 3), Cell(""), *role_dollars])
    header = ["method", "budget", "nDCG@10", "R@100", "calls/q", "input tokens/q", "output tokens/q", "model s/q", "wall s/q"]
    unpriced = sorted({r for c in matrix.cells for r in c.cost.get("unpriced", [])})
    note = ""
    if priced:
        header.append("$/q")
        if unpriced:
            note = f" Roles {', '.join(unpriced)} used tokens but have no price: totals that include them are left blank."
    return Table(header, rows, (
        f"Cost per query on {matrix.name}: model calls (cache hits included), tokens in and out, model seconds (time in "
        f"the model, cache hits count 0) and wall seconds (measured when `garen-infer bench` ran the queries), per "
        f"method and per role.{note}"))


def significance_table(matrix: DatasetMatrix, measure: str) -> Table | None:
    rows = []
    for cell in matrix.cells:
        for budget, by_measure in cell.versus.items():
            c = by_measure[measure]
            rows.append([cell.label, "—" if budget is None else str(budget), _number(c.queries, 0), Cell(f"{c.difference:+.4f}"),
                         _number(c.wins, 0), _number(c.losses, 0), _number(c.ties, 0), _p(c.t_test_p), _p(c.randomisation_p)])
    if not rows:
        return None
    rows.sort(key=lambda r: (r[1] != "—", int(r[1]) if r[1] != "—" else 0, matrix.labels.index(r[0])))
    return Table(["method", "budget", "queries", f"Δ {measure}", "wins", "losses", "ties", "paired t-test p", "randomisation p"], rows,
                 f"Each method against {matrix.baseline} at the same budget on {matrix.name}, query by query on {measure} "
                 f"(wins: the method scores higher on a query). Two-sided p-values; the randomisation test flips the sign "
                 f"of each query's difference.")


def _p(value) -> Cell:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Cell("—")
    return Cell("<0.0001" if value < 1e-4 else f"{value:.4f}")


def reachability_table(matrix: DatasetMatrix) -> Table | None:
    cells = [c for c in matrix.cells if c.reach]
    if not cells:
        return None
    hops = sorted({h for c in cells for h in c.reach}, key=lambda h: (h == "none", int(h) if h != "none" else 0))
    counts = {h: max(c.reach.get(h, {}).get("queries", 0) for c in cells) for h in hops}
    rows = []
    for c in sorted(cells, key=lambda c: (c.budget is not None, c.budget or 0, matrix.labels.index(c.label))):
        rows.append([c.label, "—" if c.budget is None else str(c.budget),
                     *(_number(c.reach[h]["hit@100"], 3) if h in c.reach else Cell("—") for h in hops)])
    header = ["method", "budget", *(f"{'>10' if h == 'none' else h} hops (n={counts[h]})" for h in hops)]
    return Table(header, rows, (
        f"Hit@100 on {matrix.name} by the minimum k-NN hops from the first-stage top 20 to a gold document (GAREN "
        f"Fig. 4/8), over the queries with no gold document in that top 20."))
