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

REPO = Path(__file__).resolve().parents[2]
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


def test_the_tree_prompts_get_the_json_the_top_down_builder_reads():
    from garen_infer.index.tree.tree_top_down import parse_clusters, parse_levels
    from garen_infer.llm.prompts import lattice_cluster, lattice_levels

    levels_prompt = lattice_levels("Supersonic flow over a wedge: shock angle and flow deflection of the "
                                   "supersonic flow.", 5)[0]["content"]
    assert standin.kind_of({}, levels_prompt) == "levels"
    levels = parse_levels(standin.answer({}, levels_prompt)["message"]["content"], 5)
    assert levels[0] == "flow" and levels[1] == "flow supersonic" and len(levels) == 5  # most frequent words first
    topics = ["flow supersonic", "flow wedge", "heat transfer", "heat plate", "shock angle", "shock wave", "buckling"]
    cluster_prompt = lattice_cluster(topics, 2, 3)[0]["content"]
    assert standin.kind_of({}, cluster_prompt) == "clustering"
    clusters = parse_clusters(standin.answer({}, cluster_prompt)["message"]["content"], len(topics), 3)
    assert sorted(sorted(members) for _, members in clusters) == [[0, 1, 6], [2, 3], [4, 5]]  # the two smallest merged
    same = parse_clusters(
        standin.answer({}, lattice_cluster(["flow a", "flow b"], 2, 3)[0]["content"])["message"]["content"],
        2,
        3,
    )
    assert [members for _, members in same] == [[0], [1]]  # one shared word: split in two


def test_the_engine_counts_each_kind_of_request_on_its_own():
    engine = standin.Engine(standin.EngineShape(capacity=1e6, saturation=1))
    try:
        engine.serve(10.0, "levels")
        engine.serve(30.0, "clustering")
        engine.serve(20.0, "clustering")
        assert engine.stats("clustering")["requests"] == 2 and engine.stats("clustering")["work_tokens"] == 50
        assert engine.stats("levels")["requests"] == 1 and engine.stats()["requests"] == 3
        assert engine.stats("summary")["requests"] == 0
    finally:
        engine.close()


def post(url: str, body: dict) -> dict:
    import json
    import urllib.request

    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_a_prompt_list_on_completions_is_answered_as_vllm_answers_the_same_chats(tiny_model_dir):
    """Each prompt of the list is a sequence of its own (its work that of the chat), answered by its ``index`` with
    the answer the chat gets when rendered by the model's template as vLLM renders it."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    server, engine = standin.serve(standin.EngineShape(capacity=1e9, saturation=1), tokenizer=tokenizer)
    url = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        chats = [[{"role": "user", "content": f"is passage {i} about wings relevant?"},
                  {"role": "assistant", "content": "<think>\n\n</think>\n\n"}]
                 for i in range(3)]
        continued = {"add_generation_prompt": False, "continue_final_message": True, "logprobs": True,
                     "top_logprobs": 20, "max_tokens": 1}
        by_chat = [post(url + "/chat/completions", {"messages": chat, **continued}) for chat in chats]
        rendered = [tokenizer.apply_chat_template(chat, tokenize=False, continue_final_message=True) for chat in chats]
        listed = post(url + "/completions",
                      {"prompt": rendered, "max_tokens": 1, "logprobs": 20, "add_special_tokens": False})
    finally:
        server.shutdown()
        engine.close()
    assert [c["index"] for c in listed["choices"]] == [0, 1, 2]
    for chat_answer, choice in zip(by_chat, listed["choices"]):
        top = {e["token"]: e["logprob"] for e in chat_answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]}
        assert choice["logprobs"]["top_logprobs"][0] == top
    assert len({choice["logprobs"]["top_logprobs"][0]["yes"] for choice in listed["choices"]}) == 3
    assert listed["usage"]["prompt_tokens"] == sum(a["usage"]["prompt_tokens"] for a in by_chat)
    # three chats, then three prompts in one call
    assert (engine.stats()["requests"], engine.stats()["calls"]) == (6, 4)


def test_the_prefix_cache_counts_the_leading_blocks_an_earlier_prompt_left():
    cache = standin.PrefixCache(cache_tokens=1_000)
    shared = "instruction and query " * 20  # 440 characters: six full blocks
    assert cache.read(shared + "first document", 120) == 0
    again = cache.read(shared + "second document", 120)
    assert again == round(120 * 6 * standin.BLOCK_CHARS / len(shared + "second document"))
    assert cache.read("another query entirely " * 20, 110) == 0
    assert (cache.prompt_tokens, cache.cached_tokens) == (350, again)
    small = standin.PrefixCache(cache_tokens=16)  # one block: the older ones are evicted
    small.read(shared, 110)
    assert small.read(shared, 110) == 0
