"""A first stage that searches with a reasoning query the generator writes live (first_stage.query:
rewrite), served here by a scripted OpenAI-compatible server: each query's text is asked once, cached,
counted under its own ledger role (query_writer), and an answer with nothing usable is counted and falls
back to the original query."""

from __future__ import annotations

import json

from openai_server import chat_answer

from garen_infer.llm.cache import ResponseCache
from garen_infer.running.query_rewrite import read_rewrite, reasoning_query_chat
from garen_infer.running.runner import RunConfig
from garen_infer.running.session import execute

REWRITES = {  # the scripted writer sends every query towards the Python documents, but one it cannot answer
    "volcanoes": "<think>lava?</think>python generator yield values lazily",
    "plants": "python list append sort",
    "dictionary": "python dictionary key lookup",
    "exception": "<think>I keep thinking",  # a thought that never closes: nothing usable
}


def writer(body: dict):
    prompt = body["messages"][-1]["content"]
    query = prompt.split("\n\n")[0]
    return chat_answer(next(text for word, text in REWRITES.items() if word in query), 30, 9)


def run(tiny_dataset, tiny_index, server, out, cache, models_read="original"):
    server.answer((200, writer))
    generator = {"backend": "openai", "base_url": server.base_url, "model": "writer", "max_retries": 0}
    stage = {"query": "rewrite", "depth": 4, "models_read": models_read}
    config = RunConfig.build(method="rerank", budget=4, first_stage=stage,
                       models={"reranker": {"backend": "embedding"}, "generator": generator})
    metrics = execute(tiny_dataset, tiny_index, config, out, cache=cache, log=lambda *_: None)
    records = {r["qid"]: r for r in map(json.loads, (out / "trace.jsonl").read_text().splitlines())}
    return metrics, records


def test_the_generator_writes_the_query_the_first_stage_searches_with(tiny_dataset, tiny_index, server,
                                                                        tmp_path):
    cache = ResponseCache(tmp_path / "responses.sqlite")
    metrics, records = run(tiny_dataset, tiny_index, server, tmp_path / "run", cache)
    assert len(server.requests) == 4  # one rewrite per query
    # the thought is dropped
    assert records["q1"]["trace"]["first_stage_query"] == "python generator yield values lazily"
    assert records["q1"]["ranking"][0].startswith("py")  # the pool the rewrite found
    writer_cost = records["q1"]["ledger"]["roles"]["query_writer"]
    assert writer_cost["requests"] == writer_cost["model_calls"] == 1 and writer_cost["output_tokens"] == 9
    # nothing usable: the original query
    assert records["q4"]["trace"]["first_stage_query"] == "catching an exception in python"
    assert records["q4"]["ledger"]["roles"]["query_writer"]["problems"] == {"unreadable": 1}
    assert metrics["answer_problems_by_role"]["query_writer"]["unreadable"] == 1

    _, again = run(tiny_dataset, tiny_index, server, tmp_path / "again", cache)
    assert len(server.requests) == 4  # every rewrite came from the cache
    assert again["q1"]["ledger"]["roles"]["query_writer"]["cache_hits"] == 1
    assert [again[q]["ranking"] for q in again] == [records[q]["ranking"] for q in again]


def test_models_read_the_rewrite_when_asked(tiny_dataset, tiny_index, server, tmp_path):
    cache = ResponseCache(tmp_path / "responses.sqlite")
    _, original = run(tiny_dataset, tiny_index, server, tmp_path / "original", cache)
    _, rewritten = run(tiny_dataset, tiny_index, server, tmp_path / "rewritten", cache, "rewritten")
    assert rewritten["q3"]["trace"]["first_stage_query"] == original["q3"]["trace"]["first_stage_query"]
    # the reranker read other text
    assert any(rewritten[q]["ranking"] != original[q]["ranking"] for q in original)


def test_the_prompt_and_the_reader():
    assert "why is the sky blue" in reasoning_query_chat("why is the sky blue")[0]["content"]
    assert read_rewrite("<think>a</think>\n  the text ") == "the text"
    assert read_rewrite("<think>unclosed") is None and read_rewrite("  ") is None


def test_the_query_follows_the_last_thought_not_the_first():
    assert read_rewrite("<think>a</think><think>b</think> the text") == "the text"
    assert read_rewrite("<think>a</think>draft</think> final") == "final"


GARBAGE = {"volcanoes": "!!! ??? ...", "plants": "zzqx qqvvz", "dictionary": "<think>x</think> ---",
           "exception": "\u2028\u3000"}  # no word, words no document holds, a thought then dashes, only spaces


def garbage_writer(body: dict):
    query = body["messages"][-1]["content"].split("\n\n")[0]
    return chat_answer(next(text for word, text in GARBAGE.items() if word in query), 30, 9)


def test_answers_no_search_can_use_are_counted_and_the_original_queries_search(tiny_dataset, tiny_index, server,
                                                                               tmp_path):
    server.answer((200, garbage_writer))
    generator = {"backend": "openai", "base_url": server.base_url, "model": "writer", "max_retries": 0}
    config = RunConfig.build(method="rerank", budget=4, first_stage={"query": "rewrite", "depth": 4},
                             models={"reranker": {"backend": "embedding"}, "generator": generator})
    lines: list[str] = []
    metrics = execute(tiny_dataset, tiny_index, config, tmp_path / "run", cache=ResponseCache(tmp_path / "c.sqlite"),
                      log=lines.append)
    records = [json.loads(line) for line in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    assert all(r["ranking"] for r in records)  # never an empty ranking
    assert [r["trace"]["first_stage_query"] for r in records] == [q.text for q in tiny_dataset.queries]
    assert metrics["answer_problems_by_role"]["query_writer"] == {"answers": 4, "unreadable": 4}
    assert any("WARNING: 4 of the 4 query_writer answers (100%) gave nothing usable" in line for line in lines)
