"""benchmarks/standin_engine.py: the throughput benchmark's stand-in engine answers every prompt the methods
send in a form the parsers read (a benchmark of fallbacks would measure nothing), as a function of the prompt
alone."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from garen_infer.llm.permutation import read_permutation
from garen_infer.llm.prompts import LISTWISE_PROMPTS

REPO = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("standin_engine", REPO / "benchmarks" / "standin_engine.py")
standin = sys.modules["standin_engine"] = importlib.util.module_from_spec(spec)  # its dataclasses look it up
spec.loader.exec_module(standin)


@pytest.mark.parametrize("prompt", ["rankgpt", "garen", "garen-reasoning"])
def test_a_listwise_window_gets_a_permutation_its_parser_reads(prompt):
    passages = ["passage one [2] cites", "passage two", "three", "four"]
    chat = LISTWISE_PROMPTS[prompt]("wing flutter", passages)
    text = "\n".join(message["content"] for message in chat)
    assert standin.listwise_passages(text) == 4
    answer = standin.answer({}, text)["message"]["content"]
    parsed = read_permutation(answer, 4)
    assert sorted(parsed.order) == [0, 1, 2, 3] and not parsed.problems
    assert standin.answer({}, text) == standin.answer({}, text)  # greedy: the same prompt, the same answer


def test_a_yes_no_request_gets_logprobs_and_anything_else_a_summary():
    yes_no = standin.answer({"logprobs": True}, "is this relevant?")
    assert {entry["token"] for entry in yes_no["logprobs"]["content"][0]["top_logprobs"]} == {"yes", "no"}
    assert standin.listwise_passages("summarise these documents") == 0
    assert '"summary"' in standin.answer({}, "summarise these documents")["message"]["content"]
