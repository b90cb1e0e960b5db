"""The report's tables, modelled on the GAREN paper: accuracy by method and budget with the best in bold, the second
underlined and significance against the baseline marked (Tables 1-3), cost per query by role (Table 7),
paired comparisons with the baseline, and Hit@100 by hop distance (Fig. 4 as numbers)."""

from __future__ import annotations

import math

from garen_infer.report.document import Cell, Table
from garen_infer.report.matrix import DatasetMatrix, family, testable

BETTER, WORSE = "▲", "▼"


def _column_label(budget) -> str:
    return "no budget" if budget is None else f"@{budget}"


def accuracy_table(matrix: DatasetMatrix, measure: str, alpha: float) -> Table:
    """Rows: methods; columns: budgets; a method without a budget repeats its one run in every column."""
    columns: list[int | None] = [*matrix.budgets] or [None]
    values = {(label, b): matrix.cell(label, b) for label in matrix.labels for b in columns}
    ranks = {}
    for b in columns:
        ordered = sorted(
            {round(c.mean(measure), 4) for (_, bb), c in values.items() if bb == b and c is not None},
            reverse=True,
        )
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
            mark = _mark(cell.versus.get(b, {}).get(measure), alpha) if testable(measure, b) else ""
            row.append(Cell(f"{value:.4f}{mark}", bold=value == ranks[b][0],
                            underline=len(ranks[b]) > 1 and value == ranks[b][1]))
        rows.append(row)
    baseline = (f" {BETTER}/{WORSE}: significantly above/below {matrix.baseline} at the same budget "
                f"({test_text(matrix, measure, alpha)})."
                if matrix.baseline else "")
    return Table(["method", *(_column_label(b) for b in columns)], rows,
                 f"{measure} on {matrix.name} ({matrix.queries_text()}). Best per column in bold, second "
                 f"underlined.{baseline}{untested_text(measure, columns)}")


def datasets_table(matrices: list[DatasetMatrix], measure: str, alpha: float) -> Table:
    """GAREN Table 1's shape: methods (at each budget) by datasets, then the average over the datasets (the
    unweighted mean of their means, shown only for a row every dataset has); best per budget and column in bold,
    second underlined; marks as in each dataset's own table."""
    budgets: list[int | None] = [*sorted({b for m in matrices for b in m.budgets})] or [None]
    labels = list(dict.fromkeys(label for m in matrices for label in m.labels))
    rows: list[list[Cell | str]] = []
    for budget in budgets:
        group = []
        for label in labels:
            cells = [m.cell(label, budget) for m in matrices]
            if all(c is None for c in cells):
                continue
            values = [None if c is None else round(c.mean(measure), 4) for c in cells]
            marks = [
                ""
                if c is None or not testable(measure, budget)
                else _mark(c.versus.get(budget, {}).get(measure), alpha)
                for c in cells
            ]
            known = [v for v in values if v is not None]
            average = None if None in values else round(sum(known) / len(values), 4)
            no_budget = next(c for c in cells if c is not None).budget is None
            group.append((label + (" (no budget)" if no_budget and budget is not None else ""),
                          values + [average], marks + [""]))
        ranks = [
            sorted({x for _, v, _ in group if (x := v[i]) is not None}, reverse=True)[:2]
            for i in range(len(matrices) + 1)
        ]
        for name, values, marks in group:  # bold and underline within the budget's rows, per column
            row: list[Cell | str] = [name, "—" if budget is None else str(budget)]
            for value, mark, best in zip(values, marks, ranks):
                row.append(Cell("—") if value is None else
                           Cell(f"{value:.4f}{mark}", bold=value == best[0],
                                underline=len(best) > 1 and value == best[1]))
            rows.append(row)
    scored = "; ".join(f"{m.name}: {m.queries_text()}" for m in matrices)
    return Table(
        ["method", "budget", *(m.name for m in matrices), "Avg"],
        rows,
        f"{measure} on each dataset and the average over the {len(matrices)} datasets (the mean of their means). "
        f"Best per budget and column in bold, second underlined; {BETTER}/{WORSE} as in each dataset's table. "
        f"Queries: {scored}.",
    )


def test_text(matrix: DatasetMatrix, measure: str, alpha: float) -> str:
    """What a mark means: the paired t-test, Holm-corrected within its family when the comparisons were adjusted."""
    adjusted = any(
        c.t_test_p_adjusted is not None
        for cell in matrix.cells
        for by in cell.versus.values()
        for c in by.values()
    )
    if not adjusted:
        return f"paired t-test, p < {alpha}"
    methods, run_files = len(family(matrix, measure)), len(family(matrix, measure, run_files=True))
    apart = f"; the {run_files} of other systems' runs apart" if run_files else ""
    return (
        f"paired t-test, Holm-corrected over the {methods} comparisons of the bench's methods with "
        f"{matrix.baseline}{apart}, p < {alpha}"
    )


def untested_text(measure: str, budgets) -> str:
    """Which columns carry no marks, and why."""
    untested = [b for b in budgets if not testable(measure, b)]
    if not untested:
        return ""
    return (f" No marks at budget {', '.join(map(str, untested))}: {measure}'s cutoff is above the budget, "
            f"so the ranks the reranker never saw decide the difference (shown, not tested: outside the Holm family).")


def _mark(comparison, alpha: float) -> str:
    p = (
        None
        if comparison is None
        else (comparison.t_test_p if comparison.t_test_p_adjusted is None else comparison.t_test_p_adjusted)
    )
    if p is None or math.isnan(p) or p >= alpha:
        return ""
    return BETTER if comparison.difference > 0 else WORSE


def _number(value, digits: int) -> Cell:
    if value is None:
        return Cell("—")
    return Cell(f"{value:,.{digits}f}")


COST_COLUMNS = ("calls/q", "input tokens/q", "output tokens/q", "model s/q", "wall s/q", "unusable %", "$/q")


def cost_table(matrix: DatasetMatrix) -> Table:
    """Per cell: accuracy and mean cost per query, then one indented line per model role (Table 7's layout). A
    cost column that is 0 (or unknown) for every cell says nothing and is left out; the caption names it."""
    rows: list[list[Cell | str]] = []
    priced = any("dollars" in c.cost for c in matrix.cells)
    measures = matrix.measures[:2]
    for cell in sorted(matrix.cells, key=lambda c: (c.budget is not None, c.budget or 0, matrix.labels.index(c.label))):
        cost = cell.cost
        dollars = [_number(cost.get("dollars"), 5)] if priced else []
        rows.append([cell.label, "—" if cell.budget is None else str(cell.budget),
                     *(_number(cell.mean(m), 4) for m in measures),
                     _number(cost["requests"], 1), _number(cost["input_tokens"], 0),
                     _number(cost["output_tokens"], 0), _number(cost["model_seconds"], 3),
                     _number(cost.get("wall_seconds"), 3),
                     _percent(cost.get("unusable")), *dollars])
        for role, rc in cost["roles"].items():
            role_dollars = [_number(rc.get("dollars"), 5)] if priced else []
            rows.append([f"  ↳ {role}", "", *(Cell("") for _ in measures), _number(rc["requests"], 1),
                         _number(rc["input_tokens"], 0),
                         _number(rc["output_tokens"], 0), _number(rc["seconds"], 3), Cell(""),
                         _percent(rc.get("unusable")), *role_dollars])
    header = ["method", "budget", *measures, *COST_COLUMNS[: 6 + priced]]
    unpriced = sorted({r for c in matrix.cells for r in c.cost.get("unpriced", [])})
    note, unknown = (
        "",
        "; — : unknown (a run file of another system)"
        if any(c.run is not None and c.run.external for c in matrix.cells)
        else "",
    )
    if priced and unpriced:
        note = f" Roles {', '.join(unpriced)} used tokens but have no price: totals that include them are left blank."
    empty = [i for i, name in enumerate(header) if name in COST_COLUMNS and all(_says_nothing(row[i]) for row in rows)]
    if empty:
        note += f" Left out, 0 or unknown for every method: {', '.join(header[i] for i in empty)}."
        header = [h for i, h in enumerate(header) if i not in empty]
        rows = [[c for i, c in enumerate(row) if i not in empty] for row in rows]
    return Table(
        header,
        rows,
        (
            f"Cost per query on {matrix.name}: model calls (cache hits included), tokens in and out, model seconds "
            "(time in the model, cache hits count 0), wall seconds (measured when `garen-infer bench` ran the "
            "queries) "
            "and the share "
            "of answers that gave nothing usable (unreadable, a thought without an answer, NaN: the method fell "
            f"back), per method and per role{unknown}.{note}"
        ),
    )


def _percent(share) -> Cell:
    return Cell("—") if share is None else Cell(f"{100 * share:.1f}")


def _says_nothing(cell) -> bool:
    """A blank, unknown or zero cell (a per-role line leaves the method-only columns blank)."""
    text = (cell.text if isinstance(cell, Cell) else str(cell)).replace(",", "").strip()
    if text in ("", "—"):
        return True
    try:
        return float(text) == 0.0
    except ValueError:
        return False


def significance_table(matrix: DatasetMatrix, measure: str) -> Table | None:
    rows: list[list[Cell | str]] = []
    level = None
    adjusted = any(by[measure].t_test_p_adjusted is not None for cell in matrix.cells for by in cell.versus.values())
    for cell in matrix.cells:
        for budget, by_measure in cell.versus.items():
            c = by_measure[measure]
            level = c.confidence
            rows.append([cell.label, "—" if budget is None else str(budget), _number(c.queries, 0),
                         Cell(f"{c.difference:+.4f}"), _ci(c),
                         _number(c.wins, 0), _number(c.losses, 0), _number(c.ties, 0), _p(c.t_test_p),
                         *([_p(c.t_test_p_adjusted)] if adjusted else []), _p(c.randomisation_p)])
    if not rows:
        return None
    rows.sort(key=lambda r: (r[1] != "—", int(str(r[1])) if r[1] != "—" else 0, matrix.labels.index(str(r[0]))))
    holm = (f" Holm: the t-test p-values adjusted within a fixed family on {matrix.name}, the bench's methods at every "
            f"budget against {matrix.baseline} ({len(family(matrix, measure))} comparisons), other systems' runs apart "
            f"(family-wise error); the marks use them.") if adjusted else ""
    return Table(
        [
            "method",
            "budget",
            "queries",
            f"Δ {measure}",
            f"{level:.0%} CI of Δ",
            "wins",
            "losses",
            "ties",
            "paired t-test p",
            *(["Holm-adjusted p"] if adjusted else []),
            "randomisation p",
        ],
        rows,
        f"Each method against {matrix.baseline} at the same budget on {matrix.name}, query by query on {measure} "
        f"(wins: the method scores higher on a query). Two-sided p-values; the randomisation test flips the sign "
        f"of each query's difference; the confidence interval is a paired bootstrap over the queries.{holm}"
        f"{untested_text(measure, sorted({b for cell in matrix.cells for b in cell.versus if b is not None}))}",
    )


def _ci(c) -> Cell:
    if c.ci_low is None or math.isnan(c.ci_low):
        return Cell("—")
    return Cell(f"[{c.ci_low:+.4f}, {c.ci_high:+.4f}]")


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
    rows: list[list[Cell | str]] = []
    for c in sorted(cells, key=lambda c: (c.budget is not None, c.budget or 0, matrix.labels.index(c.label))):
        rows.append([c.label, "—" if c.budget is None else str(c.budget),
                     *(_number(c.reach[h]["hit@100"], 3) if h in c.reach else Cell("—") for h in hops)])
    header = ["method", "budget", *(f"{'>10' if h == 'none' else h} hops (n={counts[h]})" for h in hops)]
    return Table(header, rows, (
        f"Hit@100 on {matrix.name} by the minimum k-NN hops from the first-stage top 20 to a gold document (GAREN "
        f"Fig. 4/8), over the queries with no gold document in that top 20."))
