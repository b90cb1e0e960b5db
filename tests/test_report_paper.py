"""The bench report as a paper needs it: any ir_measures measures, significance marks corrected for multiple
comparisons (Holm) with bootstrap confidence intervals, figures as PDF and SVG, a LaTeX (booktabs) table, one
budget drawn as points, and cost columns that say nothing left out."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import yaml
from scipy.stats import ttest_rel

from garen_infer.cli import main
from garen_infer.llm.cache import NoCache
from garen_infer.report import figures, tables
from garen_infer.report.bench import run_bench
from garen_infer.report.bench_config import Significance, load_bench_config
from garen_infer.report.document import Cell as TableCell, Table
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
    matrix = DatasetMatrix("toy", "toy/test", 100, len(QIDS), "idx", labels, list(budgets), baseline="rerank", measures=("nDCG@10",))
    matrix.cells.append(Cell("bm25", "bm25", None, None, {"nDCG@10": {q: v - 0.1 + 0.02 * z for (q, v), z in zip(base.items(), Z)}}, cost(0, 0.0)))
    for budget in budgets:
        matrix.cells.append(Cell("rerank", "rerank", budget, None, {"nDCG@10": dict(base)}, cost(8, 0.02, {"reranker": {
            "requests": 8, "model_calls": 8, "cache_hits": 0, "input_tokens": 0, "output_tokens": 0, "seconds": 0.02}})))
        for i in range(methods):
            scores = {q: base[q] + 0.05 + 0.12 * z for q, z in zip(QIDS, Z)}
            matrix.cells.append(Cell(f"m{i}", "garen", budget, None, {"nDCG@10": scores}, cost(10, 0.03)))
    return matrix


def test_holm_by_hand():
    # sorted: 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04 -> kept monotone at 0.06)
    assert holm([0.01, 0.04, 0.03, float("nan"), 0.005]) == pytest.approx([0.03, 0.06, 0.06, float("nan"), 0.02], nan_ok=True)
    assert holm([0.5, 0.9]) == [1.0, 1.0]  # capped at 1


def test_bootstrap_interval_is_seeded_and_covers_the_difference():
    rng = np.random.default_rng(3)
    a = rng.uniform(0, 1, 200)
    b = a - 0.03 + rng.normal(0, 0.1, 200)
    low, high = bootstrap_ci(a, b, resamples=4000, seed=0)
    assert (low, high) == bootstrap_ci(a, b, resamples=4000, seed=0)
    diffs = a - b
    half = 1.96 * diffs.std(ddof=1) / np.sqrt(len(diffs))  # the normal interval the bootstrap approximates
    assert low < diffs.mean() < high and low == pytest.approx(diffs.mean() - half, abs=0.004) and high == pytest.approx(diffs.mean() + half, abs=0.004)
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
    raw = ttest_rel([0.3 + 0.01 * (i % 7) + 0.05 + 0.12 * z for i, z in enumerate(Z)], [0.3 + 0.01 * (i % 7) for i in range(30)]).pvalue
    assert 0.0125 < raw < 0.05  # each alone is significant, four of them together are not (4 x p > 0.05)
    corrected = compare_with_baseline(hand_matrix(), Significance(permutations=200, bootstrap=500))
    table = tables.accuracy_table(corrected, "nDCG@10", 0.05)
    assert not any("▲" in c.text for row in table.rows for c in row[1:])
    assert "Holm-corrected over the 5 comparisons with rerank" in table.caption  # m0..m3 and bm25
    comparison = corrected.cell("m0", 100).versus[100]["nDCG@10"]
    assert comparison.t_test_p == pytest.approx(raw) and comparison.t_test_p_adjusted == pytest.approx(min(1, 4 * raw))
    assert comparison.difference == pytest.approx(0.05) and comparison.ci_low < comparison.difference < comparison.ci_high
    significance = tables.significance_table(corrected, "nDCG@10")
    assert "Holm-adjusted p" in significance.header and "95% CI of Δ" in significance.header
    plain = compare_with_baseline(hand_matrix(), Significance(permutations=200, bootstrap=500, correction="none"))
    table = tables.accuracy_table(plain, "nDCG@10", 0.05)
    assert sum("▲" in c.text for row in table.rows for c in row[1:]) == 4 and "Holm" not in table.caption
    assert "Holm-adjusted p" not in tables.significance_table(plain, "nDCG@10").header


def test_cost_columns_that_are_zero_for_every_method_are_left_out():
    table = tables.cost_table(hand_matrix(methods=1))
    assert table.header == ["method", "budget", "nDCG@10", "calls/q", "model s/q"]
    assert "Left out, 0 or unknown for every method: input tokens/q, output tokens/q, wall s/q." in table.caption
    assert all(len(row) == len(table.header) for row in table.rows)
    assert [str(row[0]) for row in table.rows] == ["bm25", "rerank", "  ↳ reranker", "m0"]


def test_a_single_budget_is_drawn_as_points(monkeypatch, tmp_path):
    drawn = []
    monkeypatch.setattr(figures, "save", lambda fig, path, formats=("png",): drawn.append(fig))
    figures.accuracy_vs_budget(compare_with_baseline(hand_matrix(methods=2), Significance(bootstrap=10)), tmp_path / "x.png")
    lines = [line for ax in drawn[0].axes for line in ax.get_lines()]
    assert len(lines) == 4  # bm25, rerank, m0, m1: one point each, bm25's is not a line across the plot
    assert all(len(line.get_xdata()) == 1 and line.get_linestyle() == "None" for line in lines)
    drawn.clear()
    figures.accuracy_vs_budget(compare_with_baseline(hand_matrix(methods=1, budgets=(100, 300)), Significance(bootstrap=10)), tmp_path / "y.png")
    lines = [line for ax in drawn[0].axes for line in ax.get_lines()]
    assert any(len(line.get_xdata()) == 2 and line.get_linestyle() == "-" for line in lines)  # two budgets: a curve


def test_latex_table_is_booktabs_with_the_marks():
    table = Table(["method", "@100"], [["garen_w4", TableCell("0.5123▲", bold=True)], ["rerank", TableCell("0.4000", underline=True)],
                                       ["bm25 (no budget)", TableCell("—")]], "nDCG@10 on `scifact` & 50% of **its** queries.")
    assert table_latex(table, "tab:x") == "\n".join([
        r"\begin{table}[t]", r"\centering",
        r"\caption{nDCG@10 on \texttt{scifact} \& 50\% of \textbf{its} queries.}", r"\label{tab:x}",
        r"\begin{tabular}{lr}", r"\toprule", r"method & @100 \\", r"\midrule",
        r"garen\_w4 & \textbf{0.5123$^{\blacktriangle}$} \\", r"rerank & \underline{0.4000} \\", r"bm25 (no budget) & -- \\",
        r"\bottomrule", r"\end{tabular}", r"\end{table}"])


def bench_file(tmp_path, beir_dir, index, **extra) -> str:
    config = {"preset": "cpu-default", "budgets": [4, 8], "datasets": {"tiny": {"spec": f"beir:{beir_dir}", "index": str(index)}},
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
        metrics = json.loads((tmp_path / "runs" / "tiny" / (cell["label"] + ("" if cell["budget"] is None else f"@{cell['budget']}")) / "metrics.json").read_text())
        assert cell["nDCG@10"] == pytest.approx(metrics["nDCG@10"], abs=1e-6) and 0 <= cell["AP"] <= 1 and 0 <= cell["RR@10"] <= 1
    markdown = (report / "report.md").read_text()
    assert "AP on tiny" in markdown and "RR@10 on tiny" in markdown and "R@100 on tiny" not in markdown
    with open(report / "per_query.csv") as handle:
        assert next(csv.reader(handle)) == ["dataset", "method", "budget", "query_id", "nDCG@10", "AP", "RR@10"]
    latex = (report / "tables.tex").read_text()
    assert latex.count(r"\begin{tabular}") == 4 and r"\label{tab:tiny-AP}" in latex and r"\label{tab:tiny-cost}" in latex
    assert all(f"{cell['AP']:.4f}" in latex for cell in cells)
    for stem in ("tiny-accuracy-vs-budget", "tiny-accuracy-vs-cost"):
        assert (report / "figures" / f"{stem}.png").read_bytes().startswith(b"\x89PNG")
        assert (report / "figures" / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
        assert b"<svg" in (report / "figures" / f"{stem}.svg").read_bytes()[:2000]


@pytest.mark.parametrize("change, message", [
    ({"measures": ["nDCG@10", "ndcg@20"]}, "measures: measure 'ndcg@20' is not one ir_measures reads"),
    ({"measures": []}, "measures: name at least one measure"),
    ({"figure_formats": ["png", "eps"]}, "figure_formats: unknown format(s) eps; choose from png, pdf, svg"),
    ({"significance": {"correction": "bonferroni"}}, "significance.correction must be one of holm, none, not 'bonferroni'"),
])
def test_bad_report_settings_are_one_line(change, message, beir_dir, tiny_index, tmp_path, capsys):
    assert main(["bench", "--config", bench_file(tmp_path, beir_dir, tiny_index.path, **change), "--no-cache"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and not (tmp_path / "runs").exists()
