"""GAREN at a budget no larger than its window reranks the first stage's top once and expands nothing: the run
says so in one line, once per run (not per query), with the budget that makes it explore."""

from __future__ import annotations

from garen_infer.doors.cli import main

NOTICE = ("[run] garen at budget 8: no larger than its window (20), so it reranks the first stage's top 8 once and "
          "expands no group (retrieve-and-rerank); a budget above 20 makes GAREN explore (every 10 documents more "
          "is one more iteration; 100, the paper's, is 9)")


def run(beir_dir, index, out, capsys, *extra) -> list[str]:
    argv = ["run", "--dataset", str(beir_dir), "--index", str(index.path), "--method", "garen", "--out", str(out),
            "--no-cache", *extra]
    assert main(argv) == 0
    return [line for line in capsys.readouterr().err.splitlines() if "garen at budget" in line]


def test_a_budget_within_the_window_is_said_once_per_run(beir_dir, full_index, tmp_path, capsys):
    assert run(beir_dir, full_index, tmp_path / "at-8", capsys, "--budget", "8") == [NOTICE]  # 4 queries, one line
    record = (tmp_path / "at-8" / "trace.jsonl").read_text().splitlines()[0]
    assert '"iterations": []' in record  # what the line says: no iteration expanded anything


def test_a_budget_above_the_window_says_nothing(beir_dir, full_index, tmp_path, capsys):
    """One document above the window is one more iteration, an expansion of that one document: GAREN explores."""
    assert run(beir_dir, full_index, tmp_path / "w4", capsys, "--budget", "5",
               "--set", "methods.garen.window=4", "--set", "methods.garen.keep=2") == []
    record = (tmp_path / "w4" / "trace.jsonl").read_text().splitlines()[0]
    assert '"t": 1' in record and '"expanded": 1' in record


def test_the_python_session_says_it_once_for_every_search(beir_dir, full_index, tiny_dataset):
    from garen_infer.configuration.presets import load_preset, run_config_from
    from garen_infer.llm.cache import NoCache
    from garen_infer.running.session import Session

    said: list[str] = []
    session = Session(tiny_dataset, full_index, run_config_from(load_preset("cpu-default"), "garen", 8),
                      NoCache(), log=said.append)
    for query in tiny_dataset.queries[:2]:
        session.search([query])
    assert [line for line in said if "garen at budget" in line] == [NOTICE]
