"""The RARG agent driven by a scripted policy (a fixed sequence of tool calls) over real tools on a small corpus:
scope order survives ripgrep, the observation caps and compaction behave as the paper specifies, RARG+'s entry
paragraphs and RARG++'s match reranking equal what the embedder computes independently, and the loop runs, is
counted, resumes and replays from the cache like every other method."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from agent_scripts import ScriptedPolicy, answer, call, sequence
from conftest import DOCS as TINY_DOCS

from garen_infer.agent.answer import parse_ranking
from garen_infer.agent.excerpts import split_paragraphs, split_units
from garen_infer.agent.prompts import TURN_LIMIT_NOTE
from garen_infer.agent.relevance import constructed_query
from garen_infer.agent.transcript import render
from garen_infer.data.dataset import Dataset, Document, Query
from garen_infer.errors import GarenError
from garen_infer.index.stages import IndexConfig
from garen_infer.llm.roles import Roles
from garen_infer.methods.base import get_method
from garen_infer.running.runner import RunConfig
from garen_infer.running.session import execute

SCOPED = "cat scopes/scope_1.txt | xargs -d '\\n' rg -n -i '{}'"


@pytest.fixture(scope="module")
def agent_index(tiny_index, tiny_dataset, tmp_path_factory):
    """The tiny index plus the corpus as files."""
    from garen_infer.index.folder import IndexFolder

    path = tmp_path_factory.mktemp("agent-index") / "index"
    shutil.copytree(tiny_index.path, path)
    return IndexFolder.build(tiny_dataset, path, IndexConfig.from_dict({"corpus_files": {}}), log=lambda *_: None)


def run_agent_method(name, dataset, index, out, policy, limit=None, **options):
    config = RunConfig.build(method=name, method_options=options, limit=limit)
    metrics = execute(dataset, index, config, out, roles=Roles(agent=policy), log=lambda *_: None)
    trace = {r["qid"]: r for r in map(json.loads, (out / "trace.jsonl").read_text().splitlines())}
    return metrics, trace


def tool_results(chat) -> list[str]:
    return [m["content"] for m in chat if m["role"] == "tool"]


def embedder_ranking(index, text) -> list[str]:
    """The corpus by cosine to ``text``, computed here without the agent's code."""
    scores = np.asarray(index.embeddings) @ index.embedder.encode_queries([text])[0]
    return [f"corpus/{index.doc_ids[i]}.txt" for i in sorted(range(len(scores)), key=lambda i: (-scores[i], i))]


# ---- document-level relevance: the scope and its order ----------------------------------------------------------
def test_scope_order_survives_ripgrep(agent_index, tiny_dataset, tmp_path):
    policy = ScriptedPolicy(sequence(lambda q: call("embed_recall", scope_query=q),
                                     call("bash", command=SCOPED.format("a"))))
    _, trace = run_agent_method("rarg", tiny_dataset, agent_index, tmp_path / "run", policy, limit=2)
    final_turns = [chat for chat, _ in policy.requests if len(tool_results(chat)) == 2]
    assert len(final_turns) == 2  # one per query
    for chat in final_turns:
        scope_line, matches = tool_results(chat)
        query = chat[1]["content"].split("\n")[0][7:]
        assert scope_line == f"scopes/scope_1.txt -> {query}"  # only the mapping (RARG sec. 3.2)
        expected = [p for p in embedder_ranking(agent_index, query)
                    if "a" in tiny_dataset.documents[agent_index.doc_ids.index(p[7:-4])].full_text.lower()]
        files = list(dict.fromkeys(line.split(":", 1)[0] for line in matches.splitlines()))
        assert files == expected and len(files) >= 8
    assert trace["q1"]["trace"]["scopes"] == {"scopes/scope_1.txt": TINY_QUERY["q1"]}


TINY_QUERY = {"q1": "why do volcanoes erupt lava and ash"}


def test_caps_on_matches_and_results(agent_index, tiny_dataset, tmp_path):
    policy = ScriptedPolicy(sequence(
        call("bash", command="rg -n -i e corpus"), call("bash", command="cat corpus/vol1.txt corpus/vol2.txt"),
        call("read", path="corpus/vol2.txt", offset=2, limit=1),
    ))
    run_agent_method("rarg", tiny_dataset, agent_index, tmp_path / "run", policy, limit=1, max_matches=3,
                     match_chars=20, tool_result_chars=200)
    matches, cat, read = tool_results(policy.requests[-1][0])
    lines = matches.splitlines()
    assert len(lines) == 4 and lines[3].startswith("[the first 3 of") and "matches" in lines[3]
    assert all(len(line) <= 20 + len(" [...]") for line in lines[:3]) and lines[0].endswith(" [...]")
    assert cat.endswith("[output cut at 200 characters]") and len(cat) == 200 + len("\n[output cut at 200 characters]")
    assert read == TINY_DOCS[1][2]  # line 2 of vol2: its text (line 1 is the title)


# ---- compaction ---------------------------------------------------------------------------------------------------
def test_compaction_keeps_recent_results_and_scope_mappings_and_clears_paragraphs(agent_index, tiny_dataset, tmp_path):
    turns = [lambda q: call("embed_recall", scope_query=q)] + [
        call("bash", command=f"rg -c {w} corpus") for w in ("lava", "ash", "magma", "rock")
    ]
    policy = ScriptedPolicy(sequence(*turns))
    _, trace = run_agent_method("rarg+", tiny_dataset, agent_index, tmp_path / "a", policy, limit=1,
                                init_paragraphs=2, keep_tool_results=2, compaction_threshold=1)
    results = tool_results(policy.requests[-1][0])
    assert results[0] == f"scopes/scope_1.txt -> {TINY_QUERY['q1']}"  # outside the last 2, still kept: a mapping
    assert results[1:3] == ["[cleared]", "[cleared]"]
    assert results[3].startswith("corpus/") and results[4].startswith("corpus/")
    assert trace["q1"]["trace"]["agent"]["compactions"] >= 1
    first = tool_results(policy.requests[1][0])[0]  # the embed_recall result, compacted from the start (threshold 1)
    assert "<qr_paragraph" not in first
    # above the threshold only: with the paper's 230K nothing is cleared and the paragraphs stay
    policy = ScriptedPolicy(sequence(*turns))
    run_agent_method("rarg+", tiny_dataset, agent_index, tmp_path / "b", policy, limit=1, init_paragraphs=2,
                     keep_tool_results=2)
    results = tool_results(policy.requests[-1][0])
    assert results[0].count("<qr_paragraph") == 2 and "[cleared]" not in results


# ---- RARG+ entry points -------------------------------------------------------------------------------------------
TOPICS = {
    "volcano": "Magma rises through the crust of the volcano. Lava and ash escape during the eruption. ",
    "plants": "Chlorophyll in the leaf captures sunlight. Sugars are made from carbon dioxide and water. ",
    "python": "A Python generator yields values lazily. Exceptions are caught with try and except blocks. ",
}


@pytest.fixture(scope="module")
def long_corpus(tmp_path_factory):
    """Nine documents of three 600-900 character paragraphs each, the topics mixed inside documents."""
    from garen_infer.index.folder import IndexFolder

    docs = []
    names = list(TOPICS)
    for d in range(9):
        paragraphs = [f"Part {p} of document {d}. " + TOPICS[names[(d + p) % 3]] * (7 + (d + p) % 4) for p in range(3)]
        docs.append(Document(f"long{d}", "\n\n".join(paragraphs)))
    dataset = Dataset("long", docs, [Query("q", "how does lava escape from a volcano eruption")], {"q": {"long0": 1}})
    # the runner always runs a first stage
    config = IndexConfig.from_dict({"bm25": {}, "embeddings": {}, "corpus_files": {}})
    index = IndexFolder.build(dataset, tmp_path_factory.mktemp("long") / "index", config, log=lambda *_: None)
    return dataset, index


def test_rarg_plus_shows_the_best_paragraphs_of_the_top_documents(long_corpus, tmp_path):
    dataset, index = long_corpus
    policy = ScriptedPolicy(sequence(lambda q: call("embed_recall", scope_query=q)))
    run_agent_method("rarg+", dataset, index, tmp_path / "run", policy, init_paragraphs=4, init_docs=3)
    result = tool_results(policy.requests[-1][0])[0]
    query = dataset.queries[0].text
    blocks = result.split("<qr_paragraph")[1:]
    shown = [(b.split('"')[1], b.split(">\n", 1)[1].rsplit("\n</qr_paragraph>", 1)[0]) for b in blocks]
    # independently: paragraphs of the top-3 scope documents, scored against the query, best 4
    top_docs = embedder_ranking(index, query)[:3]
    candidates = [(p, text) for p in top_docs for text in split_paragraphs(dataset.documents[int(p[11:-4])].text)]
    vectors = index.embedder.encode_documents([t for _, t in candidates], show_progress=False)
    scores = vectors @ index.embedder.encode_queries([query])[0]
    best = [candidates[i] for i in sorted(range(len(candidates)), key=lambda i: (-scores[i], i))[:4]]
    assert shown == best
    assert all(400 <= len(text) <= 1000 for _, text in shown)
    assert "volcano" in shown[0][1] and len({path for path, _ in shown}) > 1


# ---- RARG++ match-level relevance --------------------------------------------------------------------------------
def test_rarg_plus_plus_reranks_scoped_matches_with_the_constructed_query(long_corpus, tmp_path):
    dataset, index = long_corpus
    policy = ScriptedPolicy(sequence(
        lambda q: call("embed_recall", scope_query=q), call("bash", command=SCOPED.format("the|a")),
        call("bash", command=SCOPED.format("document 4")), call("bash", command="rg -n -i 'the|a' corpus"),
    ))
    _, trace = run_agent_method("rarg++", dataset, index, tmp_path / "run", policy, init_paragraphs=0,
                                max_matches=3, match_pool=12, match_chars=300)
    _, reranked, few, unscoped = tool_results(policy.requests[-1][0])
    query = dataset.queries[0].text
    # independently: the first 12 matches in scope order, scored against the constructed query
    scope = embedder_ranking(index, query)
    pool = [
        f"{p}:{n}:{line}"
        for p in scope
        for n, line in enumerate((index.path / "corpus_files" / "docs" / p[7:]).read_text().splitlines(), 1)
        if line and any(w in line.lower() for w in ("the", "a"))
    ][:12]
    text = constructed_query(get_method("rarg++").Config().match_instruction, query, ["the|a"])
    assert text.endswith("RG focus: the")  # one-letter words are not keywords
    vectors = index.embedder.encode_documents([u.split(":", 2)[2][:300] for u in pool], show_progress=False)
    scores = vectors @ index.embedder.encode_documents([text], show_progress=False)[0]
    best = [pool[i] for i in sorted(range(len(pool)), key=lambda i: (-scores[i], i))[:3]]
    lines = reranked.splitlines()
    assert [line.removesuffix(" [...]") for line in lines[:3]] == [b[:300] for b in best]
    assert lines[3].startswith("[3 of more than 12 matches, best first by relevance")
    assert "best first" not in few and len(split_units(few)) <= 3  # no more than m matches: no reranking
    assert "best first" not in unscoped and unscoped.splitlines()[-1].startswith("[the first 3 of")  # not a scope
    assert trace["q"]["trace"]["agent"]["reranked"] == 1


# ---- the loop: turn cap, broken calls, final answers ---------------------------------------------------------------
def test_turn_cap_tells_the_last_turn_to_answer(agent_index, tiny_dataset, tmp_path):
    policy = ScriptedPolicy(lambda q, turn, chat: call("bash", command="rg -c lava corpus"))
    metrics, trace = run_agent_method("rarg", tiny_dataset, agent_index, tmp_path / "run", policy, limit=1, max_turns=3)
    assert len(policy.requests) == 3
    assert policy.requests[-1][0][-1] == {"role": "user", "content": TURN_LIMIT_NOTE}
    agent = trace["q1"]["trace"]["agent"]
    assert (agent["stop"], agent["turns"], agent["tool_calls"], agent["answered"]) == ("turn_cap", 3, {"bash": 2}, 0)
    assert trace["q1"]["ledger"]["roles"]["agent"]["requests"] == 3 and trace["q1"]["ledger"]["input_tokens"] > 0
    assert trace["q1"]["ranking"] == [] and metrics["nDCG@10"] == 0.0


def test_unreadable_and_wrong_calls_are_answered_not_run(agent_index, tiny_dataset, tmp_path):
    def script(query, turn, chat):
        if turn == 1:
            return "", [("bash", "not a dict")]
        return {
            2: call("search", q="x"),
            3: call("read", path="../../etc/passwd"),
            4: call("read", path="corpus/nope.txt"),
            5: call("bash", command="rg lava; rm -rf /"),
            6: call("embed_recall", query="x"),
        }.get(turn, answer("corpus/vol1.txt"))

    policy = ScriptedPolicy(script)
    policy_chat = policy.chat

    def chat(requests):  # turn 1's call has broken arguments, as a backend reports one it could not read
        out = policy_chat(requests)
        for c in out:
            for raw in c.extra["tool_calls"]:
                if not isinstance(raw["arguments"], dict):
                    raw.update(arguments={}, error="the tool call's 'arguments' is not a JSON object")
        return out

    policy.chat = chat
    _, trace = run_agent_method("rarg", tiny_dataset, agent_index, tmp_path / "run", policy, limit=1)
    final_chat = policy.requests[-1][0]
    notes = [m["content"] for m in final_chat if m["role"] == "user"][1:]
    assert notes[0].startswith("Your tool call could not be read (the tool call's 'arguments' is not a JSON object)")
    results = tool_results(final_chat)
    assert results[0] == "Error: there is no tool 'search'; the tools are bash, read and embed_recall"
    assert results[1].startswith("Refused: '../../etc/passwd' is outside the corpus")
    assert results[2] == "Error: read: 'corpus/nope.txt' is not a file"
    assert results[3].startswith("Refused: this sandbox does not allow ';'") and results[3].endswith("Nothing was run.")
    assert results[4] == "Error: embed_recall: needs the argument 'scope_query' (a non-empty string)"
    agent = trace["q1"]["trace"]["agent"]
    assert (agent["refused"], agent["errors"], agent["stop"]) == (2, 4, "answer")
    assert trace["q1"]["ranking"] == ["vol1"]
    ids = [c["id"] for m in final_chat if m.get("tool_calls") for c in m["tool_calls"]]
    assert ids == [f"call_{t}_0" for t in range(2, 7)]  # the server's ids never reach a prompt


def test_nudges_remind_a_model_that_answers_in_prose(agent_index, tiny_dataset, tmp_path):
    prose = ("Volcanoes erupt because magma rises.", [])

    def script(query, turn, chat):  # the prose replies are not in the context, so count the reminders instead
        reminders = sum(m["content"].startswith("Your reply has no tool call") for m in chat if m["role"] == "user")
        if chat[-1]["role"] == "tool":
            return answer("corpus/vol1.txt")
        return prose if reminders < 2 else call("embed_recall", scope_query=query)

    policy = ScriptedPolicy(script)
    _, trace = run_agent_method("rarg", tiny_dataset, agent_index, tmp_path / "a", policy, limit=1, nudges=2)
    agent = trace["q1"]["trace"]["agent"]
    assert (agent["nudges"], agent["turns"], agent["stop"], trace["q1"]["ranking"]) == (2, 4, "answer", ["vol1"])
    second = policy.requests[1][0]
    assert [m["role"] for m in second] == ["system", "user", "user"]  # the prose reply is replaced by the reminder
    assert (
        second[-1]["content"].startswith("Your reply has no tool call and no final ranking")
        and TINY_QUERY["q1"] in second[-1]["content"]
    )
    assert "Volcanoes erupt because magma rises." in render(trace["q1"])  # the transcript keeps it
    # the paper's loop (no nudges): prose is the final answer, and it names no document
    policy = ScriptedPolicy(sequence(prose, final=answer("corpus/vol1.txt")))
    _, trace = run_agent_method("rarg", tiny_dataset, agent_index, tmp_path / "b", policy, limit=1)
    assert (
        len(policy.requests) == 1
        and trace["q1"]["ranking"] == []
        and trace["q1"]["trace"]["agent"]["stop"] == "answer"
    )
    assert trace["q1"]["ledger"]["problems"] == {"unreadable": 1}  # a final answer that names no document


ROWS = {"a.txt": 0, "b.txt": 1, "4983.txt": 2, "2010.txt": 3}
IDS = {"a": 0, "b": 1, "4983": 2, "2010": 3}


@pytest.mark.parametrize(
    "text, rows",
    [
        ("Final ranking:\n1. corpus/b.txt\n2. corpus/a.txt\n3. corpus/b.txt", [1, 0]),
        ("I looked at corpus/a.txt in 2010.\nFinal ranking:\n1) 4983\n2) a\n(3) corpus/2010.txt", [2, 0, 3]),
        ("Found corpus/b.txt and corpus/4983.txt, but not 2010.", [1, 2]),  # no header: file names only
        ("<think>corpus/a.txt is wrong</think>The answer: **corpus/b.txt**.", [1]),
        ("<think>corpus/a.txt looks right, but let me check corpus/b.txt", []),  # a thought cut before its answer
        ("Final Ranking\n1. `corpus/a.txt`\n2. [b.txt]\n3. corpus/unknown.txt\n4. 1.", [0, 1]),
        ("final ranking: 1. a 2. b 3. 4983 4. 2010", [0, 1]),  # cut at answer_size = 2
        ("I cannot find anything.", []),
    ],
)
def test_final_answer_parsing(text, rows):
    size = 2 if text.startswith("final ranking: 1. a") else 10
    assert parse_ranking(text, ROWS, IDS, size) == rows


# ---- runs like every other method: ledger, excluded ids, determinism, resume, cache ---------------------------------
def scripted_run(query):
    paths = {"q1": ["corpus/vol2.txt", "corpus/vol1.txt"], "q2": ["corpus/pho1.txt"],
             "q3": ["corpus/py2.txt", "corpus/py1.txt"], "q4": ["corpus/py3.txt"]}
    qid = {"why do volcanoes erupt lava and ash": "q1", "how do plants turn sunlight into sugar with chlorophyll": "q2",
           "python dictionary key lookup": "q3", "catching an exception in python": "q4"}[query]
    return sequence(lambda q: call("embed_recall", scope_query=q),
                    call("bash", command=SCOPED.format(query.split()[-1])),
                    final=answer(*paths[qid]))


def test_runs_resume_and_replay_from_the_cache(agent_index, tiny_dataset, tmp_path):
    from garen_infer.llm.backends import CachedBackend
    from garen_infer.llm.cache import ResponseCache
    from garen_infer.llm.roles import LLMToolChat

    def script(query, turn, chat):
        return scripted_run(query)(query, turn, chat)

    cache = ResponseCache(tmp_path / "cache.sqlite")
    config = RunConfig.build(method="rarg", max_active_queries=2)
    flaky = LLMToolChat(CachedBackend(ScriptedPolicy(script, fail_after=7), cache))
    with pytest.raises(GarenError, match="queries are saved"):
        execute(tiny_dataset, agent_index, config, tmp_path / "run", roles=Roles(agent=flaky), log=lambda *_: None)
    done = (tmp_path / "run" / "trace.jsonl").read_text().splitlines()
    assert 1 <= len(done) < 4
    fresh = ScriptedPolicy(script)
    metrics = execute(tiny_dataset, agent_index, config, tmp_path / "run",
                      roles=Roles(agent=LLMToolChat(CachedBackend(fresh, cache))), log=lambda *_: None)
    assert len((tmp_path / "run" / "trace.jsonl").read_text().splitlines()) == 4
    assert metrics["mean_turns"] == 3 and metrics["mean_calls_bash"] == 1 and metrics["answered_share"] == 1
    # a second run of the same configuration: every turn is a cache hit, and the run file is the same
    replay = ScriptedPolicy(script)
    again = execute(tiny_dataset, agent_index, config, tmp_path / "again",
                    roles=Roles(agent=LLMToolChat(CachedBackend(replay, cache))), log=lambda *_: None)
    assert (
        replay.requests == []
        and again["mean_cache_hits"] == again["mean_requests"] == 3
        and again["mean_model_calls"] == 0
    )
    assert (tmp_path / "run" / "run.trec").read_bytes() == (tmp_path / "again" / "run.trec").read_bytes()
    run = (tmp_path / "run" / "run.trec").read_text()
    assert "py2" not in run  # q3 excludes py2: removed in the one place excluded ids are removed
    assert [line.split()[2] for line in run.splitlines() if line.startswith("q1 ")] == ["vol2", "vol1"]
    scores = [float(line.split()[4]) for line in run.splitlines() if line.startswith("q1 ")]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)


def test_backfill_from_the_scope_and_config_checks(agent_index, tiny_dataset, tmp_path):
    policy = ScriptedPolicy(sequence(lambda q: call("embed_recall", scope_query=q), final=answer("corpus/pho1.txt")))
    _, trace = run_agent_method("rarg", tiny_dataset, agent_index, tmp_path / "run", policy, limit=1, backfill="scope")
    ranking = trace["q1"]["ranking"]
    assert ranking[0] == "pho1" and len(ranking) == 12 and trace["q1"]["trace"]["agent"]["answered"] == 1
    assert ["corpus/" + d + ".txt" for d in ranking[1:]] == [
        p for p in embedder_ranking(agent_index, TINY_QUERY["q1"]) if p != "corpus/pho1.txt"
    ]
    for bad, message in [({"match_query": "psychic"}, "match_query='psychic': expected one of"),
                         ({"max_turns": 0}, "max_turns=0: expected an integer >= 1"),
                         ({"backfill": "all"}, "backfill='all'"),
                         ({"scope_size": "many"}, "scope_size='many': expected an integer"),
                         ({"match_pool": 50}, "max_matches=60: expected an integer <= match_pool")]:
        with pytest.raises(GarenError, match=message):
            config = RunConfig.build(method="rarg", method_options=bad)
            execute(tiny_dataset, agent_index, config, tmp_path / "bad", roles=Roles(agent=policy),
                    log=lambda *_: None)


def test_transcripts_read_like_a_session(agent_index, tiny_dataset, tmp_path, capsys):
    from garen_infer.agent.transcript import main

    policy = ScriptedPolicy(sequence(lambda q: call("embed_recall", scope_query=q),
                                     call("bash", command="cat /etc/passwd"), final=answer("corpus/vol1.txt")))
    _, trace = run_agent_method("rarg", tiny_dataset, agent_index, tmp_path / "run", policy, limit=1)
    text = render(trace["q1"])
    assert "[turn 1] embed_recall(scope_query=\"why do volcanoes erupt lava and ash\")  [ok]" in text
    assert "[turn 2] bash(command=\"cat /etc/passwd\")  [refused]" in text and "outside the corpus" in text
    assert "[turn 3] model: Final ranking:" in text and text.endswith("--- final ranking: vol1")
    assert main([str(tmp_path / "run"), "--query", "q1"]) == 0 and "=== query q1" in capsys.readouterr().out


def test_a_real_transformers_model_drives_the_loop(agent_index, tiny_dataset, tiny_model_dir, tmp_path):
    """The tiny random Qwen3 through the transformers backend's tool rendering: the loop runs, is counted and
    records what the model said (which, from random weights, is noise)."""
    from garen_infer.llm.cache import NoCache

    config = RunConfig.build(method="rarg", method_options={"max_turns": 2}, limit=2,
                       models={"agent": {"backend": "transformers", "model": str(tiny_model_dir),
                                         "device": "cpu", "sampling": {"max_tokens": 12}}})
    metrics = execute(tiny_dataset, agent_index, config, tmp_path / "run", cache=NoCache(), log=lambda *_: None)
    trace = [json.loads(line) for line in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    assert len(trace) == 2 and metrics["mean_model_calls"] >= 1 and metrics["mean_input_tokens"] > 300
    assert all(r["trace"]["transcript"][0]["kind"] == "assistant" for r in trace)


def test_compaction_keeps_every_prompt_within_the_models_limit_and_the_newest_results_whole(
    agent_index, tiny_dataset, tmp_path
):
    """The paper's threshold (230K) is never reached here, but the model takes 900 tokens: older results are cleared,
    one at a time, so that no chat is sent longer than that (a backend would cut its middle, or a server refuse it)."""
    def tokens(chat):
        return sum(len(m.get("content") or "") for m in chat) // 4  # what ScriptedPolicy reports as input_tokens

    searches = [call("bash", command=f"rg -n {w} corpus") for w in ("the", "of", "and", "a", "is", "in", "to", "lava")]
    unlimited = ScriptedPolicy(sequence(*searches))
    run_agent_method("rarg", tiny_dataset, agent_index, tmp_path / "unlimited", unlimited, limit=1)
    assert tokens(unlimited.requests[-1][0]) > 900
    policy = ScriptedPolicy(sequence(*searches))
    _, trace = run_agent_method("rarg", tiny_dataset, agent_index, tmp_path / "run", policy, limit=1, context_limit=900)
    assert max(tokens(chat) for chat, _ in policy.requests) <= 900
    results = tool_results(policy.requests[-1][0])
    assert "[cleared]" in results and results[-1].startswith("corpus/")  # the newest search is whole
    assert trace["q1"]["trace"]["agent"]["compactions"] >= 1 and trace["q1"]["trace"]["agent"]["stop"] == "answer"


def test_a_context_that_cannot_fit_ends_the_episode_instead_of_being_cut(agent_index, tiny_dataset, tmp_path):
    probe = ScriptedPolicy(sequence(call("bash", command="rg -n the corpus")))
    run_agent_method("rarg", tiny_dataset, agent_index, tmp_path / "probe", probe, limit=1)
    first_turn = sum(len(m.get("content") or "") for m in probe.requests[0][0]) // 4
    policy = ScriptedPolicy(sequence(call("bash", command="rg -n the corpus")))
    _, trace = run_agent_method("rarg", tiny_dataset, agent_index, tmp_path / "run", policy, limit=1,
                                context_limit=first_turn + 5)
    assert len(policy.requests) == 1  # the first turn fits; with the search's result nothing older is left to clear
    assert trace["q1"]["trace"]["agent"]["stop"] == "context_full"


def test_a_reply_to_a_chat_the_backend_cut_is_never_used_and_the_turn_is_asked_whole(
    agent_index, tiny_dataset, tmp_path
):
    """Was: with no context_limit (a transformers agent without max_length, a limit set too high), the backend cut
    each over-long chat's middle, dropping its newest results, and the agent acted on its reply to what was left."""
    def tokens(chat):
        return sum(len(m.get("content") or "") for m in chat) // 4

    searches = [call("bash", command=f"rg -n {w} corpus") for w in ("the", "of", "and", "a", "is", "in", "to", "lava")]
    policy = ScriptedPolicy(sequence(*searches), cut_at=900)
    _, trace = run_agent_method("rarg", tiny_dataset, agent_index, tmp_path / "run", policy, limit=1)
    cut = [k for k, (chat, _) in enumerate(policy.requests) if tokens(chat) > 900]
    assert cut, "no chat outgrew the backend's limit: the test shows nothing"
    # each reply to a cut chat is dropped: the same turn is asked again, whole, with older results cleared
    for k in cut:
        again = policy.requests[k + 1][0]
        assert tokens(again) <= 900 and len(again) == len(policy.requests[k][0])
        assert "[cleared]" in tool_results(again) and tool_results(again)[-1].startswith("corpus/")
    agent = trace["q1"]["trace"]["agent"]
    assert agent["stop"] == "answer" and agent["compactions"] >= 1
    assert trace["q1"]["ledger"]["truncated_prompts"] == len(cut)  # each cut is still counted


def test_a_chat_cut_again_after_clearing_ends_the_episode(agent_index, tiny_dataset, tmp_path):
    policy = ScriptedPolicy(sequence(call("bash", command="rg -n the corpus")), cut_at=50)  # under the system prompt
    _, trace = run_agent_method("rarg", tiny_dataset, agent_index, tmp_path / "run", policy, limit=1)
    assert len(policy.requests) == 1 and trace["q1"]["trace"]["agent"]["stop"] == "context_full"
    assert trace["q1"]["ranking"] == []


def test_the_context_limit_follows_from_the_agent_models_spec():
    from garen_infer.methods.rarg import Rarg, RargConfig

    spec = {"backend": "vllm", "max_model_len": 131072, "sampling": {"max_tokens": 4096}}
    assert Rarg.settle(RargConfig(), {"agent": spec}).context_limit == 126_976
    assert Rarg.settle(RargConfig(), {"agent": {**spec, "max_length": 60_000}}).context_limit == 60_000
    assert Rarg.settle(RargConfig(), {"agent": {"backend": "openai"}}).context_limit is None
    assert Rarg.settle(RargConfig(context_limit=5000), {"agent": spec}).context_limit == 5000
