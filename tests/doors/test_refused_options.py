"""Options that look fine and are not (a negative depth, a zero cutoff, run folders inside an index), and the
readers of options and presets that must find every form they document (.yml presets, every measure of a
trec_eval family, every options section). Each refusal is one line before anything runs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from garen_infer.configuration.option_docs import documented_options, options_text
from garen_infer.configuration.presets import load_preset
from garen_infer.data.dataset import Dataset, Query
from garen_infer.doors.cli import main
from garen_infer.errors import GarenError
from garen_infer.evaluation.evaluate import measure_names
from garen_infer.report.bench import check_runs_folder
from garen_infer.report.matrix import DatasetMatrix, shared_queries


@pytest.mark.parametrize("depth", ["-1", "-5", "x", "1.5"])
def test_tree_depth_below_zero_is_refused_before_the_index_is_read(depth, capsys, tmp_path):
    with pytest.raises(SystemExit) as code:
        main(["tree", "--index", str(tmp_path / "absent"), "--depth", depth])
    err = capsys.readouterr().err
    assert code.value.code == 2 and f"expected an integer >= 0, got '{depth}'" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("text", ["nDCG@0", "R@0", "P@0.5", "ndcg_cut_0", "ndcg_cut.0,10", "recall_0"])
def test_a_cutoff_below_one_rank_is_refused(text):
    with pytest.raises(GarenError, match=f"measure '{text}': cutoff .* is not a whole number of ranks >= 1"):
        measure_names([text])


def test_every_measure_a_trec_eval_family_names_is_kept():
    assert measure_names(["ndcg_cut.5,10,20"]) == ("nDCG@5", "nDCG@10", "nDCG@20")
    assert measure_names(["P.5,10", "map"]) == ("P@5", "P@10", "AP")
    assert measure_names(["nDCG@1", "R@1000"]) == ("nDCG@1", "R@1000")


def bench(tmp_path: Path, runs: Path, *indexes: Path):
    datasets = [SimpleNamespace(index=index) for index in indexes]
    return SimpleNamespace(path=tmp_path / "bench.yaml", runs=runs, datasets=datasets)


@pytest.mark.parametrize("runs", ["index", "index/runs", "index/a/b"])
def test_run_folders_inside_an_index_folder_are_refused(tmp_path, runs):
    with pytest.raises(GarenError, match=f"runs: .* is inside the index folder {tmp_path / 'index'}"):
        check_runs_folder(bench(tmp_path, tmp_path / runs, tmp_path / "index"))


def test_run_folders_inside_any_index_folder_are_refused_even_one_the_bench_does_not_name(tmp_path):
    (tmp_path / "other-index").mkdir()
    (tmp_path / "other-index" / "manifest.json").write_text("{}")
    with pytest.raises(GarenError, match="inside the index folder"):
        check_runs_folder(bench(tmp_path, tmp_path / "other-index" / "runs", tmp_path / "index"))


def test_run_folders_beside_the_indexes_are_accepted(tmp_path):
    check_runs_folder(bench(tmp_path, tmp_path / "runs", tmp_path / "indexes" / "a", tmp_path / "indexes" / "b"))
    check_runs_folder(bench(tmp_path, tmp_path / "runs", tmp_path / "runs-index"))


def test_a_bench_file_whose_runs_point_into_an_index_exits_with_one_line(tmp_path, capsys):
    (tmp_path / "index").mkdir()
    (tmp_path / "bench.yaml").write_text(
        f"datasets:\n  tiny: {{spec: 'beir:{tmp_path}/absent', index: {tmp_path}/index}}\n"
        f"methods: [bm25]\nruns: {tmp_path}/index/runs\nreport: {tmp_path}/report\n")
    assert main(["bench", "--config", str(tmp_path / "bench.yaml")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "is inside the index folder" in err
    assert not (tmp_path / "index" / "runs").exists()


@pytest.mark.parametrize("suffix", [".yml", ".yaml"])
def test_a_preset_file_and_the_one_it_extends_are_found_with_either_suffix(tmp_path, suffix):
    (tmp_path / f"base{suffix}").write_text("extends: cpu-default\nrun:\n  max_active_queries: 3\n")
    (tmp_path / f"mine{suffix}").write_text(f"extends: base{suffix}\nrun:\n  max_batch: 5\n")
    preset = load_preset(str(tmp_path / f"mine{suffix}"))
    assert preset["run"]["max_active_queries"] == 3 and preset["run"]["max_batch"] == 5
    assert preset["index"] == load_preset("cpu-default")["index"]


@pytest.mark.parametrize("section, fields", [("first_stage", {"query", "depth", "kind"}),
                                             ("run", {"max_active_queries"})])
def test_every_preset_section_is_documented(section, fields):
    assert fields <= {doc.name for doc in documented_options(section)}
    text = options_text(section)
    assert text.startswith(f"{section}: ") and all(f"\n  {name} = " in text for name in fields)


def test_the_options_command_lists_the_first_stage(capsys):
    assert main(["options", "first_stage"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("first_stage: ") and "\n  query = " in out


def cell(name: str, answered: set[str], external: bool = False):
    return SimpleNamespace(name=name, run=SimpleNamespace(records=dict.fromkeys(answered), external=external))


def test_the_shared_queries_are_those_every_run_folder_answered():
    queries = [Query(q, q) for q in ("q1", "q2", "q3", "q4")]
    dataset = Dataset("d", [], queries, {q.id: {"d1": 1} for q in queries})
    matrix = DatasetMatrix("d", "d", 1, 4, "idx", [], [])
    matrix.cells = [cell("a", {"q1", "q2", "q3", "q4"}), cell("b", {"q1", "q2", "q3"}), cell("c", {"q2", "q3", "q4"}),
                    # another system's file: scored over the set, never narrowing it
                    cell("trec", {"q1"}, external=True)]
    assert shared_queries(matrix, dataset) == ["q2", "q3"]
    matrix.cells = [cell("a", {"q1"}), cell("b", {"q2"})]
    with pytest.raises(GarenError, match="no judged query is answered by every run folder"):
        shared_queries(matrix, dataset)
