"""``garen-infer bench`` and ``garen-infer compare`` on the tiny corpus: the report folder holds the runs' own numbers
and valid images, a rerun makes no model call, the bench file is checked before anything runs."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
import yaml
from conftest import DOCS, QRELS, QUERIES, write_beir

from garen_infer.doors.cli import main
from garen_infer.errors import GarenError
from garen_infer.llm.cache import ResponseCache
from garen_infer.report.bench import run_bench
from garen_infer.report.bench_config import load_bench_config

# A query whose gold document shares no word with it: BM25 never finds vol3, the k-NN graph is one hop away from
# what BM25 finds (vol1, vol4). Queries do not change the corpus fingerprint, so the session's full index serves.
FAR = ("q5", "magma chamber pressure", [])
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def far_dataset_dir(tmp_path_factory):
    return write_beir(tmp_path_factory.mktemp("bench-data") / "tiny", DOCS, QUERIES + [FAR],
                      QRELS + [("q5", "vol3", 1)])


def bench_file(tmp_path, data_dir, index, tiny_model_dir, **extra) -> str:
    config = {
        "preset": "cpu-default",
        "budgets": [4, 8],
        "datasets": {"tiny": {"spec": f"beir:{data_dir}", "index": str(index)}},
        "methods": ["all", {"method": "garen", "label": "garen-w4", "budgets": [8],
                            "set": ["methods.garen.window=4", "methods.garen.keep=2"]},
                    {"method": "rerank", "label": "rerank-llm", "budgets": [8], "set": [
            "models.reranker=" + json.dumps({"backend": "transformers", "model": str(tiny_model_dir), "device": "cpu",
                                             "prompt": "rankgpt", "max_words": 20, "sampling": {"max_tokens": 8}})]}],
        "baseline": "rerank",
        "significance": {"permutations": 2000, "seed": 0},
        "prices": {"reranker": {"input_per_million": 0.10, "output_per_million": 1.00}},
        "runs": str(tmp_path / "runs"),
        "report": str(tmp_path / "report"),
        **extra,
    }
    path = tmp_path / "bench.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path)


@pytest.fixture(scope="module")
def bench(far_dataset_dir, full_index, tiny_model_dir, tmp_path_factory):
    """The bench run once: (its folder, the outcome of the first run, of an immediate rerun)."""
    tmp = tmp_path_factory.mktemp("bench")
    config = load_bench_config(bench_file(tmp, far_dataset_dir, full_index.path, tiny_model_dir))
    cache = ResponseCache(tmp / "cache.sqlite")
    first = run_bench(config, cache, log=lambda *_: None)
    traces = {p: p.read_bytes() for p in (tmp / "runs").rglob("trace.jsonl")}
    again = run_bench(config, cache, log=lambda *_: None)
    return tmp, first, again, traces


def test_report_folder_has_every_file(bench):
    tmp, first, _, _ = bench
    report = tmp / "report"
    for name in ("report.md", "report.html", "summary.md", "results.json", "per_query.csv", "bench.yaml"):
        assert (report / name).is_file(), name
    figures = sorted(p.name for p in (report / "figures").glob("*.png"))
    assert figures == ["tiny-accuracy-vs-budget.png", "tiny-accuracy-vs-cost.png", "tiny-gold-distance.png",
                       "tiny-reachability.png", "tiny-traversal.png"]
    from matplotlib.image import imread

    for name in figures:
        data = (report / "figures" / name).read_bytes()
        assert data.startswith(PNG)
        image = imread(report / "figures" / name)
        assert image.shape[0] > 200 and image.shape[1] > 400 and image.std() > 0  # a real, non-blank picture
    html = (report / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(figures) and "src='figures/" not in html  # self-contained
    # 5 queries x (6 methods x 2 budgets: rerank, slidegar, garen, rgs, lattice, lattice++; bm25, garen-w4@8,
    # rerank-llm@8)
    assert first.queries_run == 5 * 15 and first.model_calls > 0


def test_the_traversal_caption_states_each_garen_runs_navigator_reliability(bench):
    """The line beside the traversal figure holds the mean of the per-query rho the run's trace recorded (the run
    with a window of 4 reranks more than one window, so it measures one)."""
    tmp, _, _, _ = bench
    report = (tmp / "report" / "report.md").read_text()
    trace = tmp / "runs" / "tiny" / "garen-w4@8" / "trace.jsonl"
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    rhos = [r["trace"]["navigator_reliability"]["rho"] for r in records]
    known = [rho for rho in rhos if rho is not None]
    assert known, "the tiny GAREN run measured no reliability: the caption's figure would go untested"
    assert "Navigator reliability (Spearman rho" in report
    assert f"garen-w4@8 {sum(known) / len(known):.2f} over {len(known)} queries" in report


def test_tables_hold_the_runs_numbers(bench):
    tmp, _, _, _ = bench
    report = (tmp / "report" / "report.md").read_text()
    results = json.loads((tmp / "report" / "results.json").read_text())["datasets"]["tiny"]
    assert {(c["label"], c["budget"]) for c in results["cells"]} == {
        ("bm25", None),
        *((m, b) for m in ("rerank", "slidegar", "garen", "rgs", "lattice", "lattice++") for b in (4, 8)),
        ("garen-w4", 8), ("rerank-llm", 8)}
    for cell in results["cells"]:
        metrics = json.loads(
            (
                tmp
                / "runs"
                / "tiny"
                / (cell["label"] + ("" if cell["budget"] is None else f"@{cell['budget']}"))
                / "metrics.json"
            ).read_text()
        )
        assert cell["nDCG@10"] == pytest.approx(metrics["nDCG@10"], abs=1e-6) and cell[
            "R@100"
        ] == pytest.approx(metrics["R@100"], abs=1e-6)
        assert f"{metrics['nDCG@10']:.4f}" in report and f"{metrics['R@100']:.4f}" in report
        assert cell["cost_per_query"]["requests"] == pytest.approx(metrics["mean_requests"], abs=1e-4)
    llm = next(c for c in results["cells"] if c["label"] == "rerank-llm")
    tokens = llm["cost_per_query"]["roles"]["reranker"]
    assert tokens["input_tokens"] > 0 and llm["cost_per_query"]["dollars"] == pytest.approx(
        (tokens["input_tokens"] * 0.10 + tokens["output_tokens"] * 1.00) / 1e6)
    assert "$/q" in report and "↳ reranker" in report
    # the far query is the only one with its gold document outside the first-stage top 20, one hop away
    reach = {(c["label"], c["budget"]): c["hit@100_by_min_hops"] for c in results["cells"]}
    assert reach[("rerank", 8)] == {"1": {"queries": 1, "hit@100": 0.0}}  # reranking BM25's list never sees vol3
    assert "Hit@100" in report
    lines = (tmp / "report" / "per_query.csv").read_text().splitlines()
    assert lines[0] == "dataset,method,budget,query_id,nDCG@10,R@100" and len(lines) == 1 + 15 * 5
    # 'all' brings in the RARG agents and REPAIR, which cpu-default has no model for: listed with the reason, not run
    skipped = {s["label"]: s["reason"] for s in results["skipped"]}
    assert set(skipped) == {"rarg", "rarg+", "rarg++", "repair"}
    assert all(
        f"sets no model for models.{'generator' if label == 'repair' else 'agent'}" in reason
        for label, reason in skipped.items()
    )
    assert "not run because" in report


def test_rerun_makes_no_model_call_and_changes_no_run(bench, monkeypatch):
    tmp, _, again, traces = bench
    assert (again.queries_run, again.model_calls) == (0, 0)
    assert all(p.read_bytes() == data for p, data in traces.items())

    def no_models(*_):
        raise AssertionError("a finished cell loaded its models")

    monkeypatch.setattr("garen_infer.llm.roles.build_roles", no_models)
    config = load_bench_config(tmp / "bench.yaml")
    assert run_bench(config, ResponseCache(tmp / "cache.sqlite"), log=lambda *_: None).queries_run == 0


def test_fresh_run_folders_are_answered_from_the_cache(bench, far_dataset_dir, full_index, tiny_model_dir,
                                                       tmp_path, capsys):
    tmp, _, _, _ = bench
    config = load_bench_config(bench_file(tmp_path, far_dataset_dir, full_index.path, tiny_model_dir))
    config.methods = [m for m in config.methods if m != "all" and m.label == "rerank-llm"]  # the LLM cell only
    capsys.readouterr()
    outcome = run_bench(config, ResponseCache(tmp / "cache.sqlite"), log=lambda *_: None)
    assert outcome.queries_run == 5 and outcome.model_calls == 0
    progress = capsys.readouterr().err  # the bar over cells names the one running (dataset, method, budget)
    assert "bench: tiny rerank-llm @8" in progress and "1/1 [" in progress
    records = [
        json.loads(line)
        for line in (tmp_path / "runs" / "tiny" / "rerank-llm@8" / "trace.jsonl").read_text().splitlines()
    ]
    assert all(
        r["ledger"]["model_calls"] == 0 and r["ledger"]["cache_hits"] == r["ledger"]["requests"] > 0
        for r in records
    )
    before = (tmp / "runs" / "tiny" / "rerank-llm@8" / "run.trec").read_text()
    assert (tmp_path / "runs" / "tiny" / "rerank-llm@8" / "run.trec").read_text() == before


def test_the_cli_runs_the_bench_and_compares_two_runs(bench, far_dataset_dir, capsys):
    tmp, _, _, _ = bench
    assert main(["bench", "--config", str(tmp / "bench.yaml"), "--cache", str(tmp / "cache.sqlite")]) == 0
    assert "0 queries run, 0 model calls" in capsys.readouterr().out
    a, b = tmp / "runs" / "tiny" / "slidegar@8", tmp / "runs" / "tiny" / "rerank@8"
    assert main(["compare", str(a), str(b), "--dataset", f"beir:{far_dataset_dir}", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    from scipy.stats import ttest_rel

    from garen_infer.data import load_dataset
    from garen_infer.report.run_results import RunResult

    dataset = load_dataset(f"beir:{far_dataset_dir}")
    sa, sb = RunResult.load(a).per_query(dataset)["nDCG@10"], RunResult.load(b).per_query(dataset)["nDCG@10"]
    qids = sorted(sa)
    ndcg = result["measures"]["nDCG@10"]
    diffs = np.array([sa[q] - sb[q] for q in qids])
    assert (
        ndcg["wins"] == int((diffs > 1e-9).sum())
        and ndcg["losses"] == int((diffs < -1e-9).sum())
        and ndcg["queries"] == 5
    )
    if np.any(np.abs(diffs) > 1e-9):
        assert ndcg["t_test_p"] == pytest.approx(ttest_rel([sa[q] for q in qids], [sb[q] for q in qids]).pvalue)
    assert main(["compare", str(a), str(b), "--dataset", f"beir:{far_dataset_dir}"]) == 0
    text = capsys.readouterr().out
    assert (
        "wins" in text
        and "t-test p" in text
        and "every number is over the 5 judged queries both runs answer" in text
    )


def test_compare_refuses_another_corpus(bench, tmp_path, capsys):
    tmp, _, _, _ = bench
    other = write_beir(tmp_path / "other", DOCS[:8], QUERIES[:2], [q for q in QRELS if q[0] in ("q1", "q2")])
    assert main(["compare", str(tmp / "runs" / "tiny" / "garen@4"), str(tmp / "runs" / "tiny" / "rerank@4"),
                 "--dataset", f"beir:{other}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "this run was made on corpus" in err[0]


def test_unavailable_cells_are_refused_before_anything_runs_or_listed(far_dataset_dir, tiny_index,
                                                                      tiny_model_dir, tmp_path):
    # the base index has no groups or proximity graph: garen and rgs cannot run on it
    path = bench_file(tmp_path, far_dataset_dir, tiny_index.path, tiny_model_dir,
                      methods=["bm25", "garen", "rgs"], budgets=[4])
    with pytest.raises(GarenError, match=r"2 cell\(s\) cannot run .*garen@4: .*'groups'.*rgs@4: .*skip_unavailable"):
        run_bench(load_bench_config(path), ResponseCache(tmp_path / "cache.sqlite"), log=lambda *_: None)
    assert not (tmp_path / "runs").exists()
    path = bench_file(tmp_path, far_dataset_dir, tiny_index.path, tiny_model_dir,
                      methods=["bm25", "garen", "rgs"], budgets=[4],
                      skip_unavailable=True, baseline="bm25")
    run_bench(load_bench_config(path), ResponseCache(tmp_path / "cache.sqlite"), log=lambda *_: None)
    report = (tmp_path / "report" / "report.md").read_text()
    assert "not run because" in report and "index stage 'groups'" in report
    # a method named on its own (not through 'all') whose role the preset has no model for is refused, not skipped
    path = bench_file(tmp_path, far_dataset_dir, tiny_index.path, tiny_model_dir, methods=["bm25", "rarg"], budgets=[4])
    with pytest.raises(GarenError,
                       match=r"1 cell\(s\) cannot run .*rarg.*preset 'cpu-default' sets no model for models.agent"):
        run_bench(load_bench_config(path), ResponseCache(tmp_path / "cache.sqlite"), log=lambda *_: None)


def test_a_simulated_cell_says_so_in_the_report_and_in_compare(far_dataset_dir, tiny_index, tiny_model_dir,
                                                               tmp_path, capsys):
    oracle = json.dumps({"backend": "oracle", "sigma": 0.3, "seed": 0})
    path = bench_file(tmp_path, far_dataset_dir, tiny_index.path, tiny_model_dir, budgets=[4], baseline="rerank",
                      methods=["rerank", {"method": "rerank", "label": "rerank-oracle",
                                          "set": [f"models.reranker={oracle}"]}])
    run_bench(load_bench_config(path), ResponseCache(tmp_path / "cache.sqlite"), log=lambda *_: None)
    for name in ("report.md", "summary.md"):
        setup = (tmp_path / "report" / name).read_text().split("nDCG@10 on tiny")[0]
        assert "**SIMULATED cells**: tiny rerank-oracle@4. SIMULATION: the oracle backend" in setup
        assert "tiny rerank@4" not in setup
    runs = tmp_path / "runs" / "tiny"
    assert main(["compare", str(runs / "rerank-oracle@4"), str(runs / "rerank@4"), "--dataset",
                 f"beir:{far_dataset_dir}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("(rerank, budget 4) [SIMULATED]") and not lines[1].endswith("[SIMULATED]")
    assert lines[-1].startswith("[SIMULATED] SIMULATION: the oracle backend")


@pytest.mark.parametrize("change, message", [
    ({"budgets": [100, 100]}, "distinct integers"),
    ({"methods": ["bm25", {"method": "rerank", "label": "bm25"}]}, "label 'bm25' appears twice"),
    ({"colour": "red"}, "unknown key"),
    ({"baselin": "rerank"}, "unknown key(s) baselin (did you mean 'baseline'?); known:"),
    ({"prices": {"reranker": {"input_per_milion": 1}}},
     "unknown field(s) input_per_milion (did you mean 'input_per_million'?)"),
    ({"methods": ["no-such-method"]}, "unknown method 'no-such-method'"),
    ({"prices": {"reranker": {"input": 1}}}, "prices.reranker: unknown field"),
])
def test_bad_bench_files_are_one_clear_error(change, message, far_dataset_dir, tiny_index, tiny_model_dir,
                                             tmp_path, capsys):
    path = bench_file(tmp_path, far_dataset_dir, tiny_index.path, tiny_model_dir, **change)
    assert main(["bench", "--config", path, "--cache", str(tmp_path / "c.sqlite")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("garen-infer bench: error: ") and message in err[0]


def test_the_report_folder_never_replaces_something_else(far_dataset_dir, tiny_index, tiny_model_dir, tmp_path, capsys):
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "notes.txt").write_text("mine")
    path = bench_file(tmp_path, far_dataset_dir, tiny_index.path, tiny_model_dir, methods=["bm25"])
    assert main(["bench", "--config", path, "--cache", str(tmp_path / "c.sqlite")]) == 2
    assert (
        "is not a bench report" in capsys.readouterr().err
        and (tmp_path / "report" / "notes.txt").read_text() == "mine"
    )
    shutil.rmtree(tmp_path / "report")
    path = bench_file(tmp_path, far_dataset_dir, tiny_index.path, tiny_model_dir, methods=["bm25"],
                      report=str(tmp_path))
    assert main(["bench", "--config", path, "--cache", str(tmp_path / "c.sqlite")]) == 2
    assert "would contain the run folders" in capsys.readouterr().err


def test_readme_section_is_regenerated_from_the_report(bench, tmp_path):
    import importlib.util

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("bench_readme", REPO / "benchmarks" / "bench_readme.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    tmp, _, _, _ = bench
    readme = tmp_path / "README.md"
    readme.write_text("# Project\n\nintro\n")
    for _ in range(2):  # appended once, then replaced in place
        section = script.readme_section(tmp / "report", tmp_path / "docs" / "bench", "the command", "a note",
                                        base=tmp_path)
        script.replace_section(readme, section)
    text = readme.read_text()
    assert text.startswith("# Project\n\nintro\n") and text.count(script.START) == text.count(script.END) == 1
    assert "#### tiny" in text and "the command" in text and "a note" in text
    links = re.findall(r"\]\((docs/bench/[^)]+\.png)\)", text)
    assert sorted(links) == ["docs/bench/tiny-accuracy-vs-budget.png", "docs/bench/tiny-accuracy-vs-cost.png"]
    assert all((tmp_path / link).read_bytes().startswith(PNG) for link in links)


def test_a_limited_bench_says_where_it_writes_and_leaves_the_full_report_alone(beir_dir, tiny_index, tmp_path, capsys):
    """``--limit N`` is a smoke run: its run folders and its report are not the bench file's, so the first line it
    prints names them, and a finished full report is not touched."""
    config = {"preset": "cpu-default", "budgets": [4],
              "datasets": {"tiny": {"spec": f"beir:{beir_dir}", "index": str(tiny_index.path)}},
              "methods": ["bm25"], "baseline": "bm25", "significance": {"permutations": 100, "bootstrap": 200},
              "runs": str(tmp_path / "runs"), "report": str(tmp_path / "reports" / "bench"), "figure_formats": ["png"]}
    path = tmp_path / "bench.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    assert main(["bench", "--config", str(path), "--no-cache"]) == 0
    full = (tmp_path / "reports" / "bench" / "report.md").read_bytes()
    capsys.readouterr()
    assert main(["bench", "--config", str(path), "--no-cache", "--limit", "2"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[bench]")]
    smoke = tmp_path / "reports" / "bench.first2"
    assert lines[0] == (
        f"[bench] --limit 2: a smoke run of the first 2 judged queries of each dataset, kept apart from the "
        f"full bench: run folders {tmp_path / 'runs'}/<dataset>/<cell>.first2, report {smoke} "
        f"({tmp_path / 'reports' / 'bench'} is left as it is)"
    )
    assert (
        lines[-1].endswith(f"report: {smoke}")
        and (tmp_path / "runs" / "tiny" / "bm25.first2" / "run.trec").is_file()
    )
    assert "the 2 of 4 judged queries" in (smoke / "report.md").read_text()
    assert (tmp_path / "reports" / "bench" / "report.md").read_bytes() == full


def test_limit_help_names_the_smoke_report(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "run folders ending .firstN, and the report in <report>.firstN beside the bench file's report" in help_text
