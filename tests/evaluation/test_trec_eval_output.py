"""``garen-infer eval --format trec_eval [-q]``: the lines trec_eval prints, with its measure names, its order and
its numbers; the values are checked against pytrec_eval (trec_eval's own code), not against this package."""

from __future__ import annotations

import json

import pytest
import pytrec_eval
from conftest import QRELS
from test_other_systems import OTHER, write_run

from garen_infer.doors.cli import main

TREC_MEASURES = {"ndcg_cut.10", "recall.100", "map", "P.5", "num_rel_ret"}
ROWS = ("num_rel_ret", "map", "P_5", "recall_100", "ndcg_cut_10")  # trec_eval's order, whatever order they are asked in


def trec_eval_lines(qids: list[str], averaged_over: int) -> list[str]:
    """What ``trec_eval -q [-c] -m ...`` prints for OTHER: pytrec_eval's values, a query the run lacks scoring 0."""
    qrels: dict[str, dict[str, int]] = {}
    for qid, doc, grade in QRELS:
        qrels.setdefault(qid, {})[doc] = grade
    run: dict[str, dict[str, float]] = {}
    for qid, doc, score in OTHER:
        run.setdefault(qid, {})[doc] = score
    values = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)
    per_query = {qid: {m: values.get(qid, {}).get(m, 0.0) for m in ROWS} for qid in qids}

    def shown(measure, value):
        return f"{int(value)}" if measure == "num_rel_ret" else f"{value:6.4f}"

    lines = [f"{m:<22}\t{qid}\t{shown(m, v)}" for qid in qids for m, v in per_query[qid].items()]
    for m in ROWS:
        total = sum(per_query[qid][m] for qid in qids)
        lines.append(f"{m:<22}\tall\t{shown(m, total if m == 'num_rel_ret' else total / averaged_over)}")
    return lines


def test_per_query_rows_and_the_all_rows_are_trec_eval_c_q(beir_dir, tmp_path, capsys):
    """Over all judged queries (trec_eval -c): q3 and q4, missing from the run, have rows of 0 and count in 'all'."""
    run = write_run(tmp_path / "other.trec")
    measures = ["nDCG@10", "R@100", "AP", "P_5", "NumRet(rel=1)"]
    assert main(["eval", "--dataset", f"beir:{beir_dir}", "--run", str(run), "-q", "--format", "trec_eval",
                 "--measures", *measures]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == trec_eval_lines(["q1", "q2", "q3", "q4"], averaged_over=4)
    assert "means over all 4" in captured.err  # which queries the means are over: still said, on stderr


def test_judged_in_run_is_trec_eval_without_c(beir_dir, tmp_path, capsys):
    run = write_run(tmp_path / "other.trec")
    argv = ["eval", "--dataset", f"beir:{beir_dir}", "--run", str(run), "--format", "trec_eval", "--judged-in-run",
            "--measures", "ndcg_cut_10", "recall_100", "map", "P_5", "num_rel_ret"]
    assert main([*argv, "-q"]) == 0
    assert capsys.readouterr().out.splitlines() == trec_eval_lines(["q1", "q2"], averaged_over=2)
    assert main(argv) == 0  # without -q: the 'all' rows alone
    assert capsys.readouterr().out.splitlines() == trec_eval_lines(["q1", "q2"], averaged_over=2)[-len(ROWS):]


def test_a_measure_trec_eval_has_no_name_for_keeps_its_own(beir_dir, tmp_path, capsys):
    run = write_run(tmp_path / "other.trec")
    assert main(["eval", "--dataset", f"beir:{beir_dir}", "--run", str(run), "--format", "trec_eval",
                 "--measures", "RR@10", "NumQ", "ndcg_cut.5,20"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(name.strip(), qid) for name, qid, _ in rows] == [("num_q", "all"), ("ndcg_cut_5", "all"),
                                                              ("ndcg_cut_20", "all"),
                                                              ("RR@10", "all")]
    assert rows[0][2] == "4"  # every judged query counted, as trec_eval -c counts them


def test_json_per_query_and_the_default_output_unchanged(beir_dir, tmp_path, capsys):
    run = write_run(tmp_path / "other.trec")
    argv = ["eval", "--dataset", f"beir:{beir_dir}", "--run", str(run), "--measures", "nDCG@10", "R@100"]
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "per_query" not in plain and plain["queries"] == 4
    assert main([*argv, "--per-query"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in result.items() if k != "per_query"} == plain
    assert list(result["per_query"]) == ["q1", "q2", "q3", "q4"] and result["per_query"]["q3"] == {
        "nDCG@10": 0.0,
        "R@100": 0.0,
    }
    for measure in ("nDCG@10", "R@100"):  # the means are the means of the rows
        assert plain[measure] == pytest.approx(sum(q[measure] for q in result["per_query"].values()) / 4)


def test_counts_are_summed_in_the_json_as_in_trec_eval_and_ir_measures(beir_dir, tmp_path, capsys):
    """num_rel_ret and num_q over the queries: the 'all' row's sum, not a mean (ir_measures' aggregate too)."""
    import ir_measures

    from garen_infer.data.beir import load_beir
    from garen_infer.storage.trec import read_run

    run = write_run(tmp_path / "other.trec")
    assert main(["eval", "--dataset", f"beir:{beir_dir}", "--run", str(run), "--measures", "NumRet(rel=1)", "NumQ",
                 "nDCG@10"]) == 0
    result = json.loads(capsys.readouterr().out)
    dataset = load_beir(beir_dir)
    qrels = [ir_measures.Qrel(q, d, r) for q, rels in dataset.qrels.items() for d, r in rels.items()]
    scored = [ir_measures.ScoredDoc(q, d, s) for q, docs in read_run(run).items() for d, s in docs.items()]
    expected = ir_measures.calc_aggregate([ir_measures.NumRet(rel=1), ir_measures.NumQ], qrels, scored)
    assert result["NumRet(rel=1)"] == expected[ir_measures.NumRet(rel=1)] > 1
    assert result["NumQ"] == 4  # every judged query, missing ones included (trec_eval -c)
