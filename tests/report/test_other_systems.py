"""Runs made by other systems (a plain TREC run file, as Anserini, PyTerrier or rank_llm write them) next to this
toolkit's: `garen-infer eval` says which queries its means are over, `compare` and the bench read run files (gzipped
or not) and score every row over the same queries, trec_eval's measure names are read, and a measure string
neither ir_measures nor trec_eval reads is one line, not a traceback."""

from __future__ import annotations

import gzip
import json
import shutil

import ir_measures
import pytest
import yaml
from conftest import QRELS, one_error_line

from garen_infer.doors.cli import main
from garen_infer.llm.cache import NoCache
from garen_infer.report.bench import run_bench
from garen_infer.report.bench_config import load_bench_config

# another system's run over two of the four judged queries (q1..q4), with its own tag and float scores
OTHER = [("q1", "vol2", 12.5), ("q1", "vol1", 11.0), ("q1", "pho1", 3.25), ("q2", "pho3", 9.0),
         ("q2", "pho1", 8.5), ("q2", "py1", 1.0)]


def write_run(path, rows=OTHER, tag="anserini-bm25"):
    ranks: dict[str, int] = {}
    lines = []
    for qid, doc, score in rows:
        ranks[qid] = ranks.get(qid, 0) + 1
        lines.append(f"{qid} Q0 {doc} {ranks[qid]} {score} {tag}")
    path.write_text("\n".join(lines) + "\n")
    return path


def by_hand(rows, measure: str, qids) -> dict[str, float]:
    """ir_measures itself on the given queries: what every number below must equal."""
    qrels = [ir_measures.Qrel(q, d, r) for q, d, r in QRELS if q in qids]
    run = [ir_measures.ScoredDoc(q, d, s) for q, d, s in rows if q in qids]
    values = {q: 0.0 for q in qids}
    values.update({m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.parse_measure(measure)],
                                                                      qrels, run)})
    return values


def test_eval_says_how_many_judged_queries_a_run_covers(beir_dir, tmp_path, capsys):
    run = write_run(tmp_path / "other.trec")
    assert main(["eval", "--dataset", f"beir:{beir_dir}", "--run", str(run)]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert (result["judged_queries"], result["judged_queries_in_run"], result["queries"]) == (4, 2, 4)
    # the missing score 0
    assert result["nDCG@10"] == pytest.approx(sum(by_hand(OTHER, "nDCG@10", ["q1", "q2"]).values()) / 4)
    assert result["mean_over"] == "all_judged"
    warning = captured.err.strip().splitlines()
    assert warning == [
        f"garen-infer eval: warning: {run} answers 2 of the 4 judged queries of tiny/test; means over all 4, the 2 "
        f"missing scoring 0 (trec_eval -c); --judged-in-run averages over the 2 it answers"
    ]

    assert main(["eval", "--dataset", f"beir:{beir_dir}", "--run", str(run), "--judged-in-run", "--measures",
                 "nDCG@10", "AP"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["queries"] == 2 and set(result) == {"nDCG@10", "AP", "queries", "judged_queries",
                                                      "judged_queries_in_run", "mean_over"}
    assert result["mean_over"] == "judged_in_run"
    for measure in ("nDCG@10", "AP"):
        assert result[measure] == pytest.approx(sum(by_hand(OTHER, measure, ["q1", "q2"]).values()) / 2)
    assert captured.err == (
        f"garen-infer eval: means over the 2 judged queries of tiny/test that {run} answers (--judged-in-run; "
        f"trec_eval without -c); 2 judged queries are missing from it and left out\n"
    )

    full = write_run(tmp_path / "full.trec", OTHER + [("q3", "py1", 1.0), ("q4", "py3", 1.0)])
    assert main(["eval", "--dataset", f"beir:{beir_dir}", "--run", str(full)]) == 0
    # every judged query answered: no warning, and still the line saying what the means are over
    assert (
        capsys.readouterr().err
        == f"garen-infer eval: means over all 4 judged queries of tiny/test, every one answered by {full}\n"
    )


def test_eval_reads_trec_eval_measure_names(beir_dir, tmp_path, capsys):
    run = write_run(tmp_path / "other.trec")
    assert main(["eval", "--dataset", f"beir:{beir_dir}", "--run", str(run), "--judged-in-run",
                 "--measures", "ndcg_cut_10", "map", "recall_100", "P_5"]) == 0
    result = json.loads(capsys.readouterr().out)
    # ir_measures' names as keys
    for name, measure in (("nDCG@10", "nDCG@10"), ("AP", "AP"), ("R@100", "R@100"), ("P@5", "P@5")):
        assert result[name] == pytest.approx(sum(by_hand(OTHER, measure, ["q1", "q2"]).values()) / 2)


def test_every_measure_neither_tool_reads_is_named_in_one_line(beir_dir, tmp_path, capsys):
    run = str(write_run(tmp_path / "other.trec"))
    assert main(["eval", "--run", run, "--dataset", f"beir:{beir_dir}", "--measures", "ndcg@10", "map",
                 "nDCG@x", "R@100"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("garen-infer eval: error: measures 'ndcg@10', 'nDCG@x': not names "
                                   "ir_measures or trec_eval reads")


def test_gzipped_runs_and_qrels_are_read_everywhere(beir_dir, tiny_index, tmp_path, capsys):
    plain = write_run(tmp_path / "other.trec")
    packed = tmp_path / "other.trec.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    gz_beir = shutil.copytree(beir_dir, tmp_path / "tiny")  # the same BEIR folder with gzipped judgements
    qrels = gz_beir / "qrels" / "test.tsv"
    qrels.write_bytes(gzip.compress(qrels.read_bytes()))
    results = []
    for run, data in ((plain, beir_dir), (packed, beir_dir), (plain, gz_beir), (packed, gz_beir)):
        assert main(["eval", "--dataset", f"beir:{data}", "--run", str(run), "--measures", "nDCG@10", "AP"]) == 0
        results.append({k: v for k, v in json.loads(capsys.readouterr().out).items()})
    assert results[0]["nDCG@10"] > 0 and all(r == results[0] for r in results)
    assert main(["compare", str(packed), str(plain), "--dataset", f"beir:{beir_dir}", "--json"]) == 0
    compared = json.loads(capsys.readouterr().out)["measures"]["nDCG@10"]
    assert compared["ties"] == 2 and compared["mean_a"] == compared["mean_b"]

    truncated = tmp_path / "cut.trec.gz"
    truncated.write_bytes(packed.read_bytes()[:-8])
    assert main(["eval", "--dataset", f"beir:{beir_dir}", "--run", str(truncated)]) == 2
    assert one_error_line(capsys, "garen-infer eval").endswith(
        f"{truncated}: not a complete gzip file (Compressed file ended before "
        f"the end-of-stream marker was reached)"
    )


@pytest.mark.parametrize("command", ["eval", "compare"])
def test_a_run_ranking_one_document_twice_is_refused(command, beir_dir, tmp_path, capsys):
    """Which of two lines counts would decide the score (nDCG@10 of 1.0 or 0.0 by line order): refused, as
    trec_eval does."""
    run = write_run(tmp_path / "twice.trec", [("q1", "vol1", 3.0), ("q1", "pho1", 2.0), ("q1", "vol1", 1.0)])
    argv = ["eval", "--run", str(run)] if command == "eval" else ["compare", str(run), str(run)]
    assert main([*argv, "--dataset", f"beir:{beir_dir}"]) == 2
    assert one_error_line(capsys, f"garen-infer {command}") == (
        f"garen-infer {command}: error: {run}, line 3: document 'vol1' is ranked twice for query 'q1' (first "
        f"on line 1); which line counts would decide the scores: keep one line per query and document")


@pytest.mark.parametrize("command", ["eval", "compare"])
@pytest.mark.parametrize("measure", ["ndcg@10", "nDCG@x", "nDCG@10 R@100"])
def test_a_measure_ir_measures_cannot_read_is_one_line(command, measure, beir_dir, tmp_path, capsys):
    run = str(write_run(tmp_path / "other.trec"))
    argv = ["eval", "--run", run] if command == "eval" else ["compare", run, run]
    assert main([*argv, "--dataset", f"beir:{beir_dir}", "--measures", "R@100", measure]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and len(err) == 1
    assert err[0].startswith(f"garen-infer {command}: error: measure '{measure}': not a name ir_measures or "
                             "trec_eval reads")
    assert "e.g. nDCG@10" in err[0]


def test_compare_takes_a_run_file_of_another_system(beir_dir, tiny_index, tmp_path, capsys):
    folder = tmp_path / "bm25"
    assert main(["run", "--dataset", f"beir:{beir_dir}", "--index", str(tiny_index.path), "--method", "bm25",
                 "--out", str(folder)]) == 0
    capsys.readouterr()
    other = write_run(tmp_path / "other.trec")
    assert main(["compare", str(other), str(folder), "--dataset", f"beir:{beir_dir}", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["a"] == {"run": str(other), "method": "run file", "budget": None, "tag": "anserini-bm25"}
    assert result["queries"] == {"a": 2, "b": 4, "both": 2} and result["mean_over"] == "judged_in_both"
    ndcg = result["measures"]["nDCG@10"]
    assert ndcg["queries"] == 2 and ndcg["mean_a"] == pytest.approx(
        sum(by_hand(OTHER, "nDCG@10", ["q1", "q2"]).values()) / 2
    )
    assert ndcg["ci_low"] <= ndcg["difference"] <= ndcg["ci_high"]
    assert main(["compare", str(other), str(folder), "--dataset", f"beir:{beir_dir}"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0] == f"A: {other} (run file, tag anserini-bm25)" and "95% CI of A-B" in text[4]
    assert text[2] == ("tiny/test: every number is over the 2 judged queries both runs answer (A answers 2, "
                       "B 4; the 2 only one answers are left out)")

    stranger = write_run(tmp_path / "stranger.trec", [("x1", "d1", 1.0)])
    assert main(["compare", str(stranger), str(folder), "--dataset", f"beir:{beir_dir}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "none of its 1 query ids is a query of 'tiny/test'; pass the dataset the run was made on"
        in err[0]
    )


def test_eval_and_compare_score_runs_without_reading_the_corpus(beir_dir, tiny_index, tmp_path, capsys):
    """Scoring needs the queries and judgements only: with corpus.jsonl gone (a BRIGHT-size corpus is
    gigabytes) eval and compare print exactly what they print with it, and a run folder of another dataset is
    still refused."""
    folder = tmp_path / "bm25"
    run = ["run", "--dataset", f"beir:{beir_dir}", "--index", str(tiny_index.path), "--method", "bm25"]
    assert main([*run, "--out", str(folder)]) == 0
    other = write_run(tmp_path / "other.trec")
    commands = [["eval", "--run", str(other)],
                ["eval", "--run", str(folder / "run.trec"), "--measures", "ndcg_cut_10", "AP"],
                ["compare", str(other), str(folder), "--json"], ["compare", str(folder), str(other)]]
    without = shutil.copytree(beir_dir, tmp_path / "tiny")  # the folder's name is the dataset's: tiny/test
    (without / "corpus.jsonl").unlink()
    capsys.readouterr()
    for argv in commands:
        assert main([*argv, "--dataset", f"beir:{beir_dir}"]) == 0
        with_corpus = capsys.readouterr()
        assert main([*argv, "--dataset", f"beir:{without}"]) == 0
        assert capsys.readouterr() == with_corpus
    renamed = shutil.copytree(without, tmp_path / "tiny2")
    assert main(["compare", str(folder), str(other), "--dataset", f"beir:{renamed}"]) == 2
    assert one_error_line(capsys, "garen-infer compare").endswith(
        f"{folder}: this run was made on corpus 'tiny/test', not on 'tiny2/test'; pass the dataset the run "
        f"used")


def bench_with_run_file(tmp_path, beir_dir, index, run_file, **extra) -> str:
    config = {"preset": "cpu-default", "budgets": [4],
              "datasets": {"tiny": {"spec": f"beir:{beir_dir}", "index": str(index),
                                    "runs": {"anserini": str(run_file)}}},
              "methods": ["bm25", "rerank"], "baseline": "anserini",
              "significance": {"permutations": 100, "bootstrap": 200},
              "runs": str(tmp_path / "runs"), "report": str(tmp_path / "report"), "figure_formats": ["png"], **extra}
    path = tmp_path / "bench.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path)


def test_a_run_file_is_a_bench_row_and_its_baseline(beir_dir, tiny_index, tmp_path):
    other = write_run(tmp_path / "other.trec", OTHER + [("q3", "py2", 2.0), ("q3", "py1", 1.0), ("q4", "py3", 1.0)])
    run_bench(load_bench_config(bench_with_run_file(tmp_path, beir_dir, tiny_index.path, other)), NoCache(),
              log=lambda *_: None)
    results = json.loads((tmp_path / "report" / "results.json").read_text())["datasets"]["tiny"]
    cells = {c["label"]: c for c in results["cells"]}
    assert set(cells) == {"bm25", "rerank", "anserini"}
    anserini = cells["anserini"]
    assert (anserini["method"], anserini["budget"], anserini["queries"]) == ("run file", None, 4)
    rows = OTHER + [("q3", "py1", 1.0), ("q4", "py3", 1.0)]  # q3's excluded py2 leaves before scoring, as for every run
    assert anserini["nDCG@10"] == pytest.approx(
        sum(by_hand(rows, "nDCG@10", ["q1", "q2", "q3", "q4"]).values()) / 4, abs=1e-6
    )
    assert anserini["cost_per_query"]["requests"] is None and anserini["hit@100_by_min_hops"] == {}  # unknown, not 0
    assert [v["budget"] for v in cells["rerank"]["versus_baseline"]] == [4] and cells["bm25"]["versus_baseline"]
    report = (tmp_path / "report" / "report.md").read_text()
    assert "**Runs of other systems** (TREC run files; no budget, cost unknown): anserini (tiny:" in report
    assert "| anserini (no budget) |" in report and "against anserini at the same budget" in report


def test_every_number_of_a_limited_bench_is_over_the_same_queries(beir_dir, tiny_index, tmp_path):
    """With --limit the run folders answer the first N judged queries; a run file ranking all of them is scored over
    the same N, or its mean and the paired test beside it would be over different queries."""
    rows = OTHER + [("q3", "py1", 1.0), ("q4", "py3", 1.0)]
    other = write_run(tmp_path / "other.trec", rows)
    outcome = run_bench(load_bench_config(bench_with_run_file(tmp_path, beir_dir, tiny_index.path, other)),
                        NoCache(), limit=2,
                        log=lambda *_: None)
    results = json.loads((outcome.report / "results.json").read_text())["datasets"]["tiny"]
    shared = ["q1", "q2"]  # the first two judged queries
    assert (
        results["queries"] == 2
        and results["queries_scored"] == "the 2 of 4 judged queries every run folder answered, for every row"
    )
    for cell in results["cells"]:
        assert cell["queries"] == 2, cell["label"]
    anserini = next(c for c in results["cells"] if c["label"] == "anserini")
    assert anserini["nDCG@10"] == pytest.approx(sum(by_hand(rows, "nDCG@10", shared).values()) / 2, abs=1e-6)
    for cell in results["cells"]:  # each paired test's mean of the run file is the table's mean of it
        for versus in cell["versus_baseline"]:
            assert versus["nDCG@10"]["queries"] == 2 and versus["nDCG@10"]["mean_b"] == pytest.approx(
                anserini["nDCG@10"], abs=1e-6
            )
    report = (outcome.report / "report.md").read_text()
    assert "nDCG@10 on tiny (the 2 of 4 judged queries every run folder answered, for every row)" in report


@pytest.mark.parametrize("runs, message", [
    ({"anserini": "missing.trec"}, "datasets.tiny.runs.anserini: missing.trec is not a file"),
    ({"bm25": "RUN"}, "datasets.tiny.runs: label 'bm25' is also a method's"),
])
def test_bad_run_file_entries_are_one_line(runs, message, beir_dir, tiny_index, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    other = write_run(tmp_path / "other.trec")
    runs = {label: str(other) if file == "RUN" else file for label, file in runs.items()}
    path = bench_with_run_file(tmp_path, beir_dir, tiny_index.path, other)
    config = yaml.safe_load(open(path))
    config["datasets"]["tiny"]["runs"] = runs
    (tmp_path / "bench.yaml").write_text(yaml.safe_dump(config))
    assert main(["bench", "--config", path, "--no-cache"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and not (tmp_path / "runs").exists()
