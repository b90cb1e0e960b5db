"""benchmarks/critical_path.py: a run's dependent chains and the share of the capacity they leave reachable, on
hand-made runs whose figures follow by arithmetic."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("critical_path", REPO / "benchmarks" / "critical_path.py")
critical_path = sys.modules["critical_path"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(critical_path)


def seq(engine: str, work: float, start: float, end: float, prompt: str = "") -> dict:
    return {"engine": engine, "work": work, "start": start, "end": end, "prompt": prompt}


def test_a_prompt_belongs_to_the_longest_query_text_it_holds():
    queries = ["wing flutter", "wing flutter at mach 2", "heat"]
    prompts = ["Query: wing flutter at mach 2\n[1] ...", "Query: wing flutter\n", "about heat transfer", "nothing"]
    assert critical_path.query_of(prompts, queries) == [1, 0, 2, None]


def test_a_sequence_asked_after_every_earlier_answer_begins_a_step():
    window, score_a, score_b, late = (
        seq("r", 1, 0.0, 2.0),
        seq("n", 1, 2.1, 2.3),
        seq("n", 1, 2.2, 2.5),
        seq("r", 1, 2.6, 3),
    )
    assert critical_path.steps_of([late, score_b, window, score_a]) == [[window], [score_a, score_b], [late]]


def test_a_request_follows_the_answer_just_before_it_within_the_gap():
    stream = [seq("g", 1, 0.0, 1.0), seq("g", 1, 0.0, 2.0), seq("g", 1, 1.1, 3.0), seq("g", 1, 2.05, 4.0),
              seq("g", 1, 9.0, 9.5)]
    assert critical_path.parents_by_answer(stream, gap=0.5) == [None, None, 0, 1, None]


def test_the_replay_shares_the_capacity_and_caps_one_request():
    graph = critical_path.Graph()
    graph.add("e", 10.0, [])
    graph.add("e", 30.0, [])
    # capacity 100 shared by two: the first done at 0.2 s, the second alone from there at most 100 / 2 a second
    assert critical_path.replay(graph, capacity=100.0, saturation=2) == {"e": (0.0, pytest.approx(0.6))}


def test_a_navigator_that_waits_for_windows_reaches_only_its_share_of_their_time():
    """Two queries, each a window (16 tokens of work) then two scores (1 each), then a second window and two more
    scores. At 160 tokens a second, 10 at most for one request: a window alone takes 1.6 s, a score 0.1 s. The
    reranker's chain is window, scores, window: 3.3 s; the navigator's scores, window, scores: 1.8 s. The replay
    starts both queries at once: the navigator's span is 1.6 s to 3.4 s for a bound of 8 / 160 = 0.05 s."""
    runs = []
    for q, text in enumerate(["query one", "query two"]):
        t = 10.0 * q  # asked one after the other in the run: the replay starts both at once
        runs += [seq("reranker", 16, t, t + 2, f"rank for {text}"), seq("navigator", 1, t + 2, t + 2.5, f"{text}: a?"),
                 seq("navigator", 1, t + 2, t + 2.4, f"{text}: b?"),
                 seq("reranker", 16, t + 3, t + 5, f"rank for {text}"),
                 seq("navigator", 1, t + 5, t + 5.2, f"{text}: c?"),
                 seq("navigator", 1, t + 5.1, t + 5.3, f"{text}: d?")]
    figures = critical_path.by_query(runs, ["query one", "query two"], capacity=160.0, saturation=16)
    assert figures["reranker"]["chain_s"] == pytest.approx(3.3) and figures["navigator"][
        "chain_s"
    ] == pytest.approx(1.8)
    assert figures["navigator"]["chain_run_s"] == pytest.approx(0.5 + 2 + 0.3)  # its steps' latencies in the run
    assert figures["reranker"]["replay_s"] == pytest.approx(3.3)  # first window at 0, second answered at 3.3
    assert figures["navigator"]["replay_s"] == pytest.approx(1.8)  # 1.6 to 3.4
    assert figures["navigator"]["reachable"] == pytest.approx(8 / 160 / 1.8, abs=1e-3)
    assert figures["reranker"]["reachable"] == pytest.approx(64 / 160 / 3.3, abs=1e-3)
    assert figures["navigator"]["unowned"] == 0


def test_a_stream_without_dependence_is_reachable_in_full():
    stream = [seq("levels", 20.0, 0.0, 5.0 + i) for i in range(32)]  # 32 at once: the engine full (saturation 16)
    figures = critical_path.by_answer(stream, capacity=160.0, saturation=16)["levels"]
    assert figures["replay_s"] == pytest.approx(32 * 20 / 160) and figures["reachable"] == pytest.approx(1.0)
    assert figures["chain_s"] == pytest.approx(2.0)
