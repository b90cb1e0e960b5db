"""Every method and index stage against a model that answers like real ones (garen_infer/testing/answers.py): each
run finishes, its ledger counts each answer shape it was sent, and its ranking falls back where an answer was
unusable. The model is scripted; the prompts, parsers, methods, stages, ledger and runner are the real ones."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest

from garen_infer.llm.backends import CachedBackend
from garen_infer.llm.cache import NoCache
from garen_infer.llm.ledger import QueryLedger
from garen_infer.llm.roles import LLMGenerator, LLMListwiseReranker, LLMToolChat, LLMYesNoScorer, Roles
from garen_infer.llm.types import RerankJob
from garen_infer.methods.lattice.slates import parse_slate_scores
from garen_infer.testing.answers import CATALOGUE, JSON_SHAPES, RANKING_SHAPES, ScriptedModel, perfect_json

DOCS = [f"passage {i} about {'lava' if i == 3 else 'rock'}" for i in range(6)]


def counted(completion) -> Counter:
    ledger = QueryLedger()
    ledger.record("role", completion)
    return Counter(ledger.summary()["problems"])


# ---- one answer of each shape, through the real parser ----------------------------------------------------------
@pytest.mark.parametrize("shape", RANKING_SHAPES, ids=lambda s: s.name)
def test_each_ranking_shape_is_read_where_readable_and_counted(shape):
    model = ScriptedModel({"ranking": (shape.name,)})
    reranker = LLMListwiseReranker(CachedBackend(model, NoCache()), DOCS, "garen")
    [(order, completion)] = reranker.rerank([RerankJob("lava", tuple(range(6)))])
    assert sorted(order) == list(range(6))  # always a permutation of the window
    assert counted(completion) == Counter(shape.counted)
    if {"unreadable", "thought_without_answer"} & set(shape.counted):
        assert order == list(range(6))  # unusable: the window keeps its first-stage order
    else:  # the model's first choice leads (DOCS[3] is the one passage that holds the query's word)
        assert order[0] == 3


@pytest.mark.parametrize("shape", JSON_SHAPES, ids=lambda s: s.name)
def test_each_json_shape_on_a_lattice_slate(shape):
    prompt = "Reply with one JSON object: relevance_scores\n[0]. lava\n\n[1]. rock\n\n[2]. ash"
    text, finish = shape.write(perfect_json(prompt))
    scores = parse_slate_scores(text, 3)
    usable = not shape.counted
    assert (scores is not None) == usable
    if usable:
        expected = {i: s / 100 for i, s in perfect_json(prompt)["relevance_scores"]}
        assert scores == expected


def test_the_catalogue_names_every_kind_the_ledger_knows():
    from garen_infer.llm import problems

    kinds = {
        getattr(problems, name)
        for name in dir(problems)
        if name.isupper() and isinstance(getattr(problems, name), str)
    }
    named = {kind for shapes in CATALOGUE.values() for shape in shapes for kind in shape.counted}
    # a new kind of problem gets a shape that produces it, unless only a server's answer can (test_openai_faults)
    assert named == kinds - set(problems.SERVER_ONLY) and set(problems.SERVER_ONLY) <= kinds


# ---- every method end to end ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def answers_index(full_index, tiny_dataset, tmp_path_factory):
    """Every cpu-default stage plus the corpus as files (RARG)."""
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig

    path = tmp_path_factory.mktemp("answers-index") / "index"
    shutil.copytree(full_index.path, path)
    return IndexFolder.build(tiny_dataset, path, IndexConfig.from_dict({"corpus_files": {}}), log=lambda *_: None)


def scripted_roles(model: ScriptedModel, dataset) -> Roles:
    backend = CachedBackend(model, NoCache())
    texts = [d.full_text for d in dataset.documents]
    return Roles(reranker=LLMListwiseReranker(backend, texts, "garen"), scorers={"navigator": LLMYesNoScorer(backend)},
                 generator=LLMGenerator(backend), agent=LLMToolChat(backend))


METHOD_OPTIONS = {"bm25": {}, "rerank": {}, "slidegar": {}, "rgs": {}, "garen": {"navigator": "model"},
                  "lattice": {"slate_scorer": "generator"}, "rarg": {"nudges": 0}}


@pytest.mark.parametrize("name", METHOD_OPTIONS)
def test_every_method_finishes_and_counts_each_shape(name, answers_index, tiny_dataset, tmp_path):
    from garen_infer.configuration.presets import load_preset, run_config_from
    from garen_infer.running.session import execute

    preset = load_preset("cpu-default")
    preset.setdefault("methods", {})[name] = {**(preset["methods"].get(name) or {}), **METHOD_OPTIONS[name]}
    config = run_config_from(preset, name, budget=10 if name not in ("bm25", "rarg") else None)
    model = ScriptedModel()
    lines: list[str] = []
    metrics = execute(tiny_dataset, answers_index, config, tmp_path / "run",
                      roles=scripted_roles(model, tiny_dataset), log=lines.append)

    trace = [json.loads(line) for line in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    assert sorted(r["qid"] for r in trace) == ["q1", "q2", "q3", "q4"]
    expected = Counter()
    for (kind, shape_name), uses in model.used.items():
        shape = next(s for s in CATALOGUE[kind] if s.name == shape_name)
        expected.update({k: uses for k in shape.counted})
    problems = Counter(metrics["answer_problems"])
    if name == "bm25":
        assert not model.used and not problems
    else:
        assert model.used, "the method asked the model nothing"
        assert set(expected) <= set(problems)  # every kind of answer sent is counted
    if name in ("rerank", "slidegar", "rgs"):  # listwise only: one answer, one reading
        assert problems == expected
    assert any(line.startswith("[run] answers not used as asked:") for line in lines)
    for record in trace:
        if name == "lattice" and not record["ranking"]:  # slates never readable: no leaf reached, and it is counted
            assert record["trace"]["failed_slates"] == record["ledger"]["problems"]["unreadable"] >= 1
        elif name != "rarg":  # the others rank documents for each query even when answers were unusable
            assert record["ranking"], (name, record["qid"])


def test_a_run_of_mostly_unusable_answers_says_so_loudly(tiny_index, tiny_dataset, tmp_path):
    from garen_infer.configuration.presets import load_preset, run_config_from
    from garen_infer.running.session import execute

    model = ScriptedModel({"ranking": ("refusal", "think_unclosed", "plain")})
    lines: list[str] = []
    config = run_config_from(load_preset("cpu-default"), "rerank", budget=10)
    metrics = execute(tiny_dataset, tiny_index, config, tmp_path / "run",
                      roles=scripted_roles(model, tiny_dataset), log=lines.append)
    warning = [line for line in lines if "WARNING" in line]
    assert len(warning) == 1 and "reranker answers" in warning[0] and "nothing usable" in warning[0]
    unusable = model.used[("ranking", "refusal")] + model.used[("ranking", "think_unclosed")]
    by_role = metrics["answer_problems_by_role"]["reranker"]
    assert by_role["unreadable"] + by_role["thought_without_answer"] == unusable > 0


def test_listwise_answers_from_a_served_model_are_read_and_counted_as_the_engines_are(
    tiny_index, tiny_dataset, tmp_path, server
):
    """The same shapes through the OpenAI-compatible backend and a scripted server (HTTP, finish_reason, a 429
    without Retry-After first): the run finishes and the ledger counts what the shapes name, and the retry."""
    from openai_server import chat_answer, quota_exceeded

    from garen_infer.configuration.presets import load_preset, run_config_from
    from garen_infer.llm.backends.openai_backend import OpenAIBackend
    from garen_infer.llm.types import SamplingParams
    from garen_infer.running.session import execute

    # a server's content is text or null: a number as content is refused as a malformed body (test_openai_faults)
    model = ScriptedModel({"ranking": tuple(s.name for s in RANKING_SHAPES if s.name != "number_content")})

    def answer(body):
        [c] = model.generate([body["messages"]], SamplingParams(temperature=body.get("temperature", 0.0)))
        return chat_answer(c.text, c.input_tokens, c.output_tokens, c.finish_reason)

    server.answer((429, quota_exceeded(0.01)), (200, answer))
    backend = OpenAIBackend("shaped", base_url=server.base_url, api_key_env=None, max_retries=2, timeout=30)
    roles = Roles(reranker=LLMListwiseReranker(CachedBackend(backend, NoCache()),
                                               [d.full_text for d in tiny_dataset.documents], "garen"))
    lines: list[str] = []
    config = run_config_from(load_preset("cpu-default"), "rerank", budget=10)
    metrics = execute(tiny_dataset, tiny_index, config, tmp_path / "run", roles=roles, log=lines.append)
    expected = Counter({"retry:429": 1})
    for (_, name), uses in model.used.items():
        expected.update({k: uses for k in next(s for s in RANKING_SHAPES if s.name == name).counted})
    assert len(model.used) > 1 and Counter(metrics["answer_problems"]) == expected
    assert metrics["answer_problems_by_role"]["reranker"]["answers"] == sum(model.used.values())
    assert any(line.startswith("[run] answers not used as asked: reranker ") for line in lines)


# ---- index stages with a generator -----------------------------------------------------------------------------
@pytest.mark.parametrize("shape", JSON_SHAPES, ids=lambda s: s.name)
def test_group_summaries_and_tree_descriptions_survive_each_json_shape(
    shape, tiny_index, tiny_dataset, tmp_path, monkeypatch
):
    from garen_infer.configuration.presets import load_preset
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.grouping import groups
    from garen_infer.index.stages import IndexConfig
    from garen_infer.llm import json_generation

    model = ScriptedModel({"json": (shape.name,)})

    def scripted_generator(spec, folder, texts):
        return LLMGenerator(CachedBackend(model, NoCache()))

    monkeypatch.setattr(groups, "stage_generator", scripted_generator)
    monkeypatch.setattr(json_generation, "stage_generator", scripted_generator)
    stages = load_preset("cpu-default")["index"]
    summarizer = {"backend": "transformers", "model": "scripted"}
    config = IndexConfig.from_dict({"groups": {**stages["groups"], "summarizer": summarizer},
                                    "semantic_tree": {**stages["semantic_tree"], "summarizer": summarizer}})
    path = tmp_path / "index"
    shutil.copytree(tiny_index.path, path)
    index = IndexFolder.build(tiny_dataset, path, config, log=lambda *_: None)
    groups_info = index.manifest["stages"]["groups"]["info"]
    tree_info = index.manifest["stages"]["semantic_tree"]["info"]
    asked = model.used[("json", shape.name)]
    found = Counter(groups_info["answer_problems"]) + Counter(tree_info["answer_problems"])
    assert found == Counter({kind: asked for kind in shape.counted})  # every ask, retries included
    if shape.counted:  # never usable, however often asked: each item is asked 1 + retries times, then falls back
        asks = {"groups": 1 + index.params("groups").summary_retries,
                "semantic_tree": 1 + index.params("semantic_tree").retries}
        assert groups_info["summary_fallbacks"] == groups_info["groups"] > 0
        for kind in shape.counted:
            assert groups_info["answer_problems"][kind] == groups_info["summary_fallbacks"] * asks["groups"]
            assert (
                tree_info["answer_problems"].get(kind, 0)
                == tree_info["description_fallbacks"] * asks["semantic_tree"]
            )
    else:
        assert groups_info["summary_fallbacks"] == 0 and tree_info["description_fallbacks"] == 0
