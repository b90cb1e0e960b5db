"""The bench report as a paper needs it: any ir_measures measures, significance marks corrected for multiple
comparisons (Holm) with bootstrap confidence intervals, figures as PDF and SVG, a LaTeX (booktabs) table, one
budget drawn as points, and cost columns that say nothing left out."""

from __future__ import annotations

import csv
import json
import re

import matplotlib.text
import numpy as np
import pytest
import yaml
from scipy.stats import ttest_rel

from garen_infer.doors.cli import main
from garen_infer.llm.cache import NoCache
from garen_infer.report import figures, tables
from garen_infer.report.bench import run_bench
from garen_infer.report.bench_config import Significance, load_bench_config
from garen_infer.report.document import Cell as TableCell
from garen_infer.report.document import Table
from garen_infer.report.latex import table_latex
from garen_infer.report.matrix import Cell, DatasetMatrix, compare_with_baseline
from garen_infer.report.significance import bootstrap_ci, holm

QIDS = [f"q{i:02d}" for i in range(30)]
Z = np.array([1.0, -1.0] * 15)  # mean 0: each method's per-query gain over the baseline is 0.05 + 0.12 z


def cost(requests: float, model_seconds: float, roles=None) -> dict:
    return {"requests": requests, "model_calls": requests, "cache_hits": 0, "input_tokens": 0, "output_tokens": 0,
            "model_seconds": model_seconds, "budget_used": 0, "wall_seconds": None, "unpriced": [],
            "roles": roles or {}}


def hand_matrix(methods: int = 4, budgets=(100,)) -> DatasetMatrix:
    """A baseline and ``methods`` methods that each beat it by the same margin (raw paired t-test p = 0.033)."""
    base = {q: 0.3 + 0.01 * (i % 7) for i, q in enumerate(QIDS)}
    labels = ["bm25", "rerank", *(f"m{i}" for i in range(methods))]
    matrix = DatasetMatrix("toy", "toy/test", 100, len(QIDS), "idx", labels, list(budgets), baseline="rerank",
                           measures=("nDCG@10",))
    matrix.cells.append(Cell("bm25", "bm25", None, None,
                             {"nDCG@10": {q: v - 0.1 + 0.02 * z for (q, v), z in zip(base.items(), Z)}}, cost(0, 0.0)))
    for budget in budgets:
        matrix.cells.append(Cell("rerank", "rerank", budget, None, {"nDCG@10": dict(base)}, cost(8, 0.02, {"reranker": {
            "requests": 8, "model_calls": 8, "cache_hits": 0, "input_tokens": 0, "output_tokens": 0,
            "seconds": 0.02}})))
        for i in range(methods):
            scores = {q: base[q] + 0.05 + 0.12 * z for q, z in zip(QIDS, Z)}
            matrix.cells.append(Cell(f"m{i}", "garen", budget, None, {"nDCG@10": scores}, cost(10, 0.03)))
    return matrix


def test_holm_by_hand():
    # sorted: 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04 -> kept monotone at 0.06)
    assert holm([0.01, 0.04, 0.03, float("nan"), 0.005]) == pytest.approx(
        [0.03, 0.06, 0.06, float("nan"), 0.02], nan_ok=True
    )
    assert holm([0.5, 0.9]) == [1.0, 1.0]  # capped at 1


def test_bootstrap_interval_is_seeded_and_covers_the_difference():
    rng = np.random.default_rng(3)
    a = rng.uniform(0, 1, 200)
    b = a - 0.03 + rng.normal(0, 0.1, 200)
    low, high = bootstrap_ci(a, b, resamples=4000, seed=0)
    assert (low, high) == bootstrap_ci(a, b, resamples=4000, seed=0)
    diffs = a - b
    half = 1.96 * diffs.std(ddof=1) / np.sqrt(len(diffs))  # the normal interval the bootstrap approximates
    assert (
        low < diffs.mean() < high
        and low == pytest.approx(diffs.mean() - half, abs=0.004)
        and high == pytest.approx(diffs.mean() + half, abs=0.004)
    )
    assert bootstrap_ci([0.2, 0.4, 0.6], [0.1, 0.3, 0.5]) == pytest.approx((0.1, 0.1))  # every resample differs by 0.1


def test_the_interval_is_the_95_percent_one():
    """On 2,000 queries the percentile bootstrap is the normal interval to Monte Carlo error (about 1% of its width
    at 20,000 resamples): 1.96 standard errors each side, where a 90% interval has 1.645."""
    rng = np.random.default_rng(5)
    a, b = rng.uniform(0, 1, 2000), rng.uniform(0, 1, 2000)
    low, high = bootstrap_ci(a, b, resamples=20_000, seed=0)
    diffs = a - b
    assert (high - low) / 2 == pytest.approx(1.96 * diffs.std(ddof=1) / np.sqrt(len(diffs)), rel=0.04)


def test_marks_are_holm_corrected_over_the_comparisons_with_the_baseline():
    raw = ttest_rel([0.3 + 0.01 * (i % 7) + 0.05 + 0.12 * z for i, z in enumerate(Z)],
                    [0.3 + 0.01 * (i % 7) for i in range(30)]).pvalue
    assert 0.0125 < raw < 0.05  # each alone is significant, four of them together are not (4 x p > 0.05)
    corrected = compare_with_baseline(hand_matrix(), Significance(permutations=200, bootstrap=500))
    table = tables.accuracy_table(corrected, "nDCG@10", 0.05)
    assert not any("▲" in c.text for row in table.rows for c in row[1:])
    # m0..m3, bm25
    assert "Holm-corrected over the 5 comparisons of the bench's methods with rerank, p < 0.05" in table.caption
    comparison = corrected.cell("m0", 100).versus[100]["nDCG@10"]
    assert comparison.t_test_p == pytest.approx(raw) and comparison.t_test_p_adjusted == pytest.approx(min(1, 4 * raw))
    assert (
        comparison.difference == pytest.approx(0.05)
        and comparison.ci_low < comparison.difference < comparison.ci_high
    )
    significance = tables.significance_table(corrected, "nDCG@10")
    assert "Holm-adjusted p" in significance.header and "95% CI of Δ" in significance.header
    plain = compare_with_baseline(hand_matrix(), Significance(permutations=200, bootstrap=500, correction="none"))
    table = tables.accuracy_table(plain, "nDCG@10", 0.05)
    assert sum("▲" in c.text for row in table.rows for c in row[1:]) == 4 and "Holm" not in table.caption
    assert "Holm-adjusted p" not in tables.significance_table(plain, "nDCG@10").header


def test_cost_columns_that_are_zero_for_every_method_are_left_out():
    table = tables.cost_table(hand_matrix(methods=1))
    assert table.header == ["method", "budget", "nDCG@10", "calls/q", "model s/q"]
    assert (
        "Left out, 0 or unknown for every method: input tokens/q, output tokens/q, wall s/q, unusable %."
        in table.caption
    )
    assert all(len(row) == len(table.header) for row in table.rows)
    assert [str(row[0]) for row in table.rows] == ["bm25", "rerank", "  ↳ reranker", "m0"]


def test_the_cost_table_shows_the_share_of_unusable_answers_where_there_are_any():
    matrix = hand_matrix(methods=1)
    rerank = matrix.cell("rerank", 100)
    rerank.cost = {**rerank.cost, "unusable": 0.25,
                   "roles": {"reranker": {**rerank.cost["roles"]["reranker"], "unusable": 0.25}}}
    table = tables.cost_table(matrix)
    assert table.header == ["method", "budget", "nDCG@10", "calls/q", "model s/q", "unusable %"]
    assert [row[-1].text for row in table.rows] == ["—", "25.0", "25.0", "—"]


def test_run_results_read_the_unusable_share_from_the_ledgers():
    from garen_infer.report.run_results import unusable_share

    costs = [{"requests": 6, "problems": {"unreadable": 1, "ids_missing": 2}},
             {"requests": 2, "problems": {"thought_without_answer": 1}}, {}]
    assert unusable_share(costs) == 0.25
    assert unusable_share([{"requests": 3}]) == 0.0 and unusable_share([]) == 0.0


def test_a_single_budget_is_drawn_as_points(monkeypatch, tmp_path):
    drawn = []
    monkeypatch.setattr(figures, "save", lambda fig, path, formats=("png",): drawn.append(fig))
    figures.accuracy_vs_budget(compare_with_baseline(hand_matrix(methods=2), Significance(bootstrap=10)),
                               tmp_path / "x.png")
    lines = [line for ax in drawn[0].axes for line in ax.get_lines()]
    assert len(lines) == 4  # bm25, rerank, m0, m1: one point each, bm25's is not a line across the plot
    assert all(len(line.get_xdata()) == 1 and line.get_linestyle() == "None" for line in lines)
    drawn.clear()
    figures.accuracy_vs_budget(
        compare_with_baseline(hand_matrix(methods=1, budgets=(100, 300)), Significance(bootstrap=10)),
        tmp_path / "y.png",
    )
    lines = [line for ax in drawn[0].axes for line in ax.get_lines()]
    assert any(len(line.get_xdata()) == 2 and line.get_linestyle() == "-" for line in lines)  # two budgets: a curve


def test_latex_table_is_booktabs_with_the_marks():
    table = Table(["method", "@100"], [["garen_w4", TableCell("0.5123▲", bold=True)],
                                       ["rerank", TableCell("0.4000", underline=True)],
                                       ["bm25 (no budget)", TableCell("—")]],
                  "nDCG@10 on `scifact` & 50% of **its** queries. Marks: a test.")
    assert table_latex(table, "tab:x") == "\n".join([
        r"\begin{table}[t]", r"\centering", r"\small",
        r"\caption{nDCG@10 on \texttt{scifact} \& 50\% of \textbf{its} queries.}", r"\label{tab:x}",
        r"\begin{tabular}{lr}", r"\toprule", r"method & @100 \\", r"\midrule",
        r"garen\_w4 & \textbf{0.5123$^{\blacktriangle}$} \\", r"rerank & \underline{0.4000} \\",
        r"bm25 (no budget) & -- \\",
        r"\bottomrule", r"\end{tabular}", r"\par\smallskip\parbox{\linewidth}{\footnotesize Marks: a test.}",
        r"\end{table}"])
    wide = Table([f"c{i}" for i in range(7)], [["x", *("1.0" for _ in range(6))]], "A wide one.")
    # spans the page
    assert table_latex(wide).startswith(r"\begin{table*}[t]") and table_latex(wide).endswith(r"\end{table*}")


def with_recall(matrix: DatasetMatrix) -> DatasetMatrix:
    """The hand matrix with R@100 beside nDCG@10 (the same per-query values)."""
    matrix.measures = ("nDCG@10", "R@100")
    for cell in matrix.cells:
        cell.scores["R@100"] = dict(cell.scores["nDCG@10"])
    return matrix


def test_no_marks_where_the_cutoff_is_above_the_budget():
    """At budget 50 the ranks 51-100 of the reranking baseline are the first stage's: a R@100 difference there holds
    by construction, so it is shown but neither marked nor counted in the Holm family; at budget 100 it is."""
    plain = compare_with_baseline(with_recall(hand_matrix(methods=1, budgets=(50, 100))),
                                  Significance(bootstrap=10, correction="none"))
    recall = tables.accuracy_table(plain, "R@100", 0.05)
    m0 = next(row for row in recall.rows if row[0] == "m0")
    assert "▲" not in m0[1].text and "▲" in m0[2].text  # the same per-query gain: unmarked at 50, marked at 100
    assert "No marks at budget 50: R@100's cutoff is above the budget" in recall.caption
    ndcg = tables.accuracy_table(plain, "nDCG@10", 0.05)
    assert "No marks" not in ndcg.caption and "▲" in next(row for row in ndcg.rows if row[0] == "m0")[1].text
    corrected = compare_with_baseline(with_recall(hand_matrix(methods=1, budgets=(50, 100))),
                                      Significance(bootstrap=10))
    assert corrected.cell("m0", 50).versus[50]["R@100"].t_test_p_adjusted is None  # outside the family
    assert corrected.cell("m0", 100).versus[100]["R@100"].t_test_p_adjusted is not None
    assert corrected.cell("m0", 50).versus[50]["nDCG@10"].t_test_p_adjusted is not None
    assert "50" in [row[1] for row in tables.significance_table(corrected, "R@100").rows]  # shown all the same


def test_the_holm_family_is_the_bench_methods_and_a_run_file_moves_no_mark():
    before = compare_with_baseline(hand_matrix(methods=2), Significance(bootstrap=10))
    matrix = hand_matrix(methods=2)
    matrix.labels.append("anserini")
    matrix.run_files = {"anserini": "anserini.trec"}
    matrix.cells.append(Cell("anserini", "run file", None, None,
                             {"nDCG@10": dict(matrix.cell("m0", 100).scores["nDCG@10"])}, cost(0, 0.0)))
    after = compare_with_baseline(matrix, Significance(bootstrap=10))
    for label in ("bm25", "m0", "m1"):
        adjusted = [m.cell(label, 100).versus[100]["nDCG@10"].t_test_p_adjusted for m in (before, after)]
        assert adjusted[0] == adjusted[1], label
    anserini = after.cell("anserini", 100).versus[100]["nDCG@10"]
    assert anserini.t_test_p_adjusted == anserini.t_test_p  # a family of its own: one comparison
    caption = tables.accuracy_table(after, "nDCG@10", 0.05).caption
    assert (
        "Holm-corrected over the 3 comparisons of the bench's methods with rerank; the 1 of other systems' runs apart"
        in caption
    )


def test_a_table_across_datasets_with_the_average():
    first = compare_with_baseline(hand_matrix(methods=1, budgets=(100, 300)), Significance(bootstrap=10))
    second = hand_matrix(methods=0, budgets=(100, 300))
    second.name = "other"
    second = compare_with_baseline(second, Significance(bootstrap=10))
    table = tables.datasets_table([first, second], "nDCG@10", 0.05)
    assert table.header == ["method", "budget", "toy", "other", "Avg"]
    rows = {(row[0], row[1]): row for row in table.rows}
    rerank = rows[("rerank", "100")]
    means = [m.cell("rerank", 100).mean("nDCG@10") for m in (first, second)]
    assert float(rerank[4].text) == pytest.approx(sum(means) / 2, abs=1e-4)
    assert rows[("m0", "300")][3].text == "—" and rows[("m0", "300")][4].text == "—"  # not run on 'other': no average
    assert rows[("bm25 (no budget)", "100")] and [r[1] for r in table.rows] == ["100"] * 3 + ["300"] * 3
    assert "average over the 2 datasets" in table.caption


def test_figures_fit_a_two_column_paper(monkeypatch, tmp_path):
    """A column wide for one panel, a page wide for two; no title inside; text 7 pt or more; TrueType in the PDF."""
    matrix = compare_with_baseline(hand_matrix(methods=1, budgets=(100, 300)), Significance(bootstrap=10))
    assert figures.accuracy_vs_budget(matrix, tmp_path / "budget.png", ("pdf",))  # one measure: one panel
    assert figures.accuracy_vs_cost(matrix, tmp_path / "cost.png", ("pdf",))  # calls and seconds: two panels
    for name, width in (("budget", figures.COLUMN_WIDTH), ("cost", figures.PAGE_WIDTH)):
        pdf = (tmp_path / f"{name}.pdf").read_bytes()
        assert b"/Type3" not in pdf and b"/FontFile2" in pdf  # TrueType (Type 42): what ACM and IEEE accept
        assert float(re.search(rb"/MediaBox \[ *0 0 ([0-9.]+) ", pdf).group(1)) == pytest.approx(width * 72, abs=0.5)
    drawn = []
    monkeypatch.setattr(figures, "save", lambda fig, path, formats=("png",): drawn.append(fig))
    figures.accuracy_vs_budget(matrix, tmp_path / "x.png")
    figures.accuracy_vs_cost(matrix, tmp_path / "y.png")
    for fig in drawn:
        assert fig.get_suptitle() == "" and not any(ax.get_title() for ax in fig.axes)
        sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text) if t.get_text() and t.get_visible()]
        assert sizes and min(sizes) >= 7


def bench_file(tmp_path, beir_dir, index, **extra) -> str:
    config = {"preset": "cpu-default", "budgets": [4, 8],
              "datasets": {"tiny": {"spec": f"beir:{beir_dir}", "index": str(index)}},
              "methods": ["bm25", "rerank", "slidegar"], "baseline": "rerank", "measures": ["nDCG@10", "AP", "RR@10"],
              "significance": {"permutations": 200, "bootstrap": 500}, "figure_formats": ["pdf", "svg"],
              "runs": str(tmp_path / "runs"), "report": str(tmp_path / "report"), **extra}
    path = tmp_path / "bench.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path)


def test_the_bench_report_takes_any_measures_and_writes_latex_pdf_and_svg(beir_dir, tiny_index, tmp_path):
    config = load_bench_config(bench_file(tmp_path, beir_dir, tiny_index.path))
    run_bench(config, NoCache(), log=lambda *_: None)
    report = tmp_path / "report"
    first = {p.name: p.read_bytes() for p in (report / "figures").iterdir()}
    run_bench(config, NoCache(), log=lambda *_: None)  # the same numbers again: the same files, byte for byte
    assert {p.name: p.read_bytes() for p in (report / "figures").iterdir()} == first
    results = json.loads((report / "results.json").read_text())
    assert results["measures"] == ["nDCG@10", "AP", "RR@10"] and results["significance"]["correction"] == "holm"
    cells = results["datasets"]["tiny"]["cells"]
    for cell in cells:
        label = cell["label"] + ("" if cell["budget"] is None else f"@{cell['budget']}")
        metrics = json.loads((tmp_path / "runs" / "tiny" / label / "metrics.json").read_text())
        assert (
            cell["nDCG@10"] == pytest.approx(metrics["nDCG@10"], abs=1e-6)
            and 0 <= cell["AP"] <= 1
            and 0 <= cell["RR@10"] <= 1
        )
    markdown = (report / "report.md").read_text()
    assert "AP on tiny" in markdown and "RR@10 on tiny" in markdown and "R@100 on tiny" not in markdown
    with open(report / "per_query.csv") as handle:
        assert next(csv.reader(handle)) == ["dataset", "method", "budget", "query_id", "nDCG@10", "AP", "RR@10"]
    latex = (report / "tables.tex").read_text()
    assert (
        latex.count(r"\begin{tabular}") == 4
        and r"\label{tab:tiny-AP}" in latex
        and r"\label{tab:tiny-cost}" in latex
    )
    assert all(f"{cell['AP']:.4f}" in latex for cell in cells)
    for stem in ("tiny-accuracy-vs-budget", "tiny-accuracy-vs-cost"):
        assert (report / "figures" / f"{stem}.png").read_bytes().startswith(b"\x89PNG")
        assert (report / "figures" / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
        assert b"<svg" in (report / "figures" / f"{stem}.svg").read_bytes()[:2000]


@pytest.mark.parametrize("change, message", [
    ({"measures": ["nDCG@10", "ndcg@20"]}, "measures: measure 'ndcg@20': not a name ir_measures or trec_eval reads"),
    ({"measures": []}, "measures: name at least one measure"),
    ({"figure_formats": ["png", "eps"]}, "figure_formats: unknown format(s) eps; choose from png, pdf, svg"),
    ({"significance": {"correction": "bonferroni"}},
     "significance.correction must be one of holm, none, not 'bonferroni'"),
])
def test_bad_report_settings_are_one_line(change, message, beir_dir, tiny_index, tmp_path, capsys):
    assert main(["bench", "--config", bench_file(tmp_path, beir_dir, tiny_index.path, **change), "--no-cache"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and not (tmp_path / "runs").exists()
