"""The response cache in front of a real transformers model (a tiny random Qwen3 built by conftest): a repeated
request is answered from the cache with the same text or score, and a rerun of a whole run makes no model call."""

from __future__ import annotations

import json

import pytest

from garen_infer.llm.backends import CachedBackend
from garen_infer.llm.cache import NoCache, ResponseCache
from garen_infer.llm.prompts import rankgpt, yes_no
from garen_infer.llm.types import SamplingParams

GREEDY = SamplingParams(max_tokens=12)
PREFIX = "<think>\n\n</think>\n\n"


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    from garen_infer.llm.backends.transformers_backend import TransformersBackend

    return TransformersBackend(model=str(tiny_model_dir), device="cpu", batch_size=4)


class CountingBackend:
    """Passes requests to the real backend and remembers how many prompts reached it."""

    def __init__(self, inner):
        self.inner, self.id, self.prompts = inner, inner.id, 0

    def generate(self, chats, params):
        self.prompts += len(chats)
        return self.inner.generate(chats, params)

    def score_yes_no(self, chats, prefix):
        self.prompts += len(chats)
        return self.inner.score_yes_no(chats, prefix)


def chats():
    return [
        rankgpt("why do volcanoes erupt", ["Magma rises through the crust.", "Chlorophyll is green."]),
        rankgpt("python dictionary lookup",
                ["A dict maps keys to values.", "Lava cools into basalt.", "Lists are mutable."]),
    ]


def test_backend_loads_the_saved_model(backend, tiny_model_dir):
    assert backend.id == f"transformers:{tiny_model_dir}|prompt<=4096"  # the model's context bounds its prompts
    assert (backend.device, backend.dtype) == ("cpu", "float32")
    assert backend.tokenizer.padding_side == "left"


def test_generate_is_greedy_and_deterministic(backend):
    first = backend.generate(chats(), GREEDY)
    second = backend.generate(list(reversed(chats())), GREEDY)
    assert [c.text for c in first] == [c.text for c in reversed(second)]  # batch order and padding do not matter
    assert all(0 < c.output_tokens <= GREEDY.max_tokens and c.input_tokens > 20 for c in first)
    assert not any(c.cached for c in first)


def test_score_yes_no_is_a_probability(backend):
    pairs = [("why do volcanoes erupt", "Magma rises through the crust."),
             ("python", "Chlorophyll is green."), ("q", "")]
    scores = [c.score for c in backend.score_yes_no([yes_no(q, d) for q, d in pairs], PREFIX)]
    assert all(0.0 <= s <= 1.0 for s in scores)
    again = [c.score for c in backend.score_yes_no([yes_no(q, d) for q, d in pairs[:1]], PREFIX)]
    assert again[0] == pytest.approx(scores[0], abs=1e-5)  # alone or in a padded batch


def test_second_call_is_served_from_the_cache(backend, tmp_path):
    counting = CountingBackend(backend)
    cached = CachedBackend(counting, ResponseCache(tmp_path / "c.sqlite"))
    first = cached.generate(chats(), GREEDY)
    assert counting.prompts == 2 and not any(c.cached for c in first)
    second = cached.generate(chats(), GREEDY)
    assert counting.prompts == 2 and all(c.cached for c in second)
    assert [c.text for c in second] == [c.text for c in first]
    assert [(c.input_tokens, c.output_tokens) for c in second] == [(c.input_tokens, c.output_tokens) for c in first]

    # the cache is a file: a new process (here: a new cache object) finds the answers too
    reopened = CachedBackend(counting, ResponseCache(tmp_path / "c.sqlite"))
    assert [c.text for c in reopened.generate(chats(), GREEDY)] == [c.text for c in first]
    assert counting.prompts == 2

    # other sampling parameters are another request
    cached.generate(chats()[:1], SamplingParams(max_tokens=5))
    assert counting.prompts == 3


def test_yes_no_scores_are_cached(backend, tmp_path):
    counting = CountingBackend(backend)
    cached = CachedBackend(counting, ResponseCache(tmp_path / "c.sqlite"))
    prompts = [yes_no("volcano", "lava"), yes_no("python", "dict")]
    first = cached.score_yes_no(prompts, PREFIX)
    second = cached.score_yes_no(prompts, PREFIX)
    assert counting.prompts == 2 and all(c.cached for c in second)
    assert [c.score for c in second] == [c.score for c in first]
    cached.score_yes_no(prompts, "")  # another assistant prefix is another prompt
    assert counting.prompts == 4


def test_a_replayed_answer_to_a_cut_prompt_still_counts_its_cut(backend, tmp_path):
    counting = CountingBackend(backend)
    cached = CachedBackend(counting, ResponseCache(tmp_path / "c.sqlite"))
    prompts = [yes_no("volcano", "lava " * 5000), yes_no("python", "dict")]
    first = cached.score_yes_no(prompts, PREFIX)
    second = cached.score_yes_no(prompts, PREFIX)
    assert all(c.cached for c in second) and [c.truncated_tokens for c in second] == [c.truncated_tokens for c in first]
    assert first[0].truncated_tokens > 0 == first[1].truncated_tokens
    assert cached.truncated_prompts == 2  # once per answer handed out


def test_duplicates_in_one_batch_are_computed_once(backend, tmp_path):
    counting = CountingBackend(backend)
    cached = CachedBackend(counting, ResponseCache(tmp_path / "c.sqlite"))
    a, b = chats()
    out = cached.generate([a, b, a, a], GREEDY)
    assert counting.prompts == 2
    assert [c.cached for c in out] == [False, False, True, True]  # the first asker pays; repeats are hits
    assert out[0].text == out[2].text == out[3].text


def test_no_cache_always_calls_the_model(backend):
    counting = CountingBackend(backend)
    cached = CachedBackend(counting, NoCache())
    cached.generate(chats(), GREEDY)
    cached.generate(chats(), GREEDY)
    assert counting.prompts == 4


def test_rerun_of_a_whole_run_makes_no_model_call(backend, tiny_dataset, tiny_index, tmp_path):
    from garen_infer.llm.roles import LLMListwiseReranker, Roles
    from garen_infer.running.runner import RunConfig
    from garen_infer.running.session import execute

    cache = ResponseCache(tmp_path / "c.sqlite")
    config = RunConfig.build(method="rerank", method_options={"budget": 6, "window": 4, "stride": 2})
    doc_texts = [d.full_text for d in tiny_dataset.documents]

    def run(out):
        reranker = LLMListwiseReranker(CachedBackend(backend, cache), doc_texts, "rankgpt", max_words=30,
                                       sampling=SamplingParams(max_tokens=16))
        return execute(tiny_dataset, tiny_index, config, out, roles=Roles(reranker=reranker), log=lambda *_: None)

    first = run(tmp_path / "first")
    assert first["mean_model_calls"] > 0 and first["mean_input_tokens"] > 0
    second = run(tmp_path / "second")
    assert second["mean_model_calls"] == 0
    assert second["mean_cache_hits"] == first["mean_model_calls"] + first["mean_cache_hits"] > 0
    assert second["mean_input_tokens"] == first["mean_input_tokens"]  # costs are replayed, not zeroed
    assert (tmp_path / "second" / "run.trec").read_bytes() == (tmp_path / "first" / "run.trec").read_bytes()
    trace = [json.loads(line) for line in (tmp_path / "second" / "trace.jsonl").read_text().splitlines()]
    assert all(t["ledger"]["roles"]["reranker"]["model_calls"] == 0 for t in trace)


def test_a_run_with_model_specs_fills_the_given_cache(tiny_model_dir, tiny_dataset, tiny_index, tmp_path):
    """The runner builds its roles from ``models:`` and uses the cache it is given, even while that is empty."""
    from garen_infer.running.runner import RunConfig
    from garen_infer.running.session import execute

    cache = ResponseCache(tmp_path / "fresh.sqlite")
    models = {"reranker": {"backend": "transformers", "model": str(tiny_model_dir), "device": "cpu",
                           "prompt": "rankgpt",
                           "max_words": 20, "sampling": {"max_tokens": 8}}}
    options = {"budget": 4, "window": 4, "stride": 2}
    config = RunConfig.build(method="rerank", method_options=options, models=models, limit=2)
    first = execute(tiny_dataset, tiny_index, config, tmp_path / "a", cache=cache, log=lambda *_: None)
    assert first["mean_model_calls"] > 0
    assert len(cache) == 2 * first["mean_model_calls"]  # two queries, every answer stored in this file
    second = execute(tiny_dataset, tiny_index, config, tmp_path / "b",
                     cache=ResponseCache(tmp_path / "fresh.sqlite"), log=lambda *_: None)
    assert second["mean_model_calls"] == 0 and second["mean_cache_hits"] == first["mean_model_calls"]


def _cross_encoder(tiny_bert_dir, folder):
    """The tiny BERT with a one-label relevance head, saved as a cross-encoder folder."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    AutoModelForSequenceClassification.from_pretrained(tiny_bert_dir, num_labels=1).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_bert_dir).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("backend_name", ["transformers", "cross-encoder"])
def test_a_replay_from_the_cache_loads_no_model(backend_name, tiny_model_dir, tiny_bert_dir, tiny_dataset,
                                                tiny_index, tmp_path,
                                               monkeypatch):
    """A run the cache answers in full takes its backend's id from the model's configuration and never loads the
    weights; a prompt the cache cannot answer loads them once."""
    import transformers

    from garen_infer.running.runner import RunConfig
    from garen_infer.running.session import execute

    if backend_name == "transformers":
        auto, model = transformers.AutoModelForCausalLM, str(tiny_model_dir)
        spec = {"prompt": "rankgpt", "max_words": 20, "sampling": {"max_tokens": 8}}
    else:
        auto, model = (
            transformers.AutoModelForSequenceClassification,
            str(_cross_encoder(tiny_bert_dir, tmp_path / "head")),
        )
        spec = {"mode": "pointwise"}
    loads = []
    load = auto.from_pretrained
    monkeypatch.setattr(auto, "from_pretrained", lambda *args, **kwargs: loads.append(args[0]) or load(*args, **kwargs))
    models = {"reranker": {"backend": backend_name, "model": model, "device": "cpu", **spec}}

    def run(out, limit):
        config = RunConfig.build(method="rerank", method_options={"budget": 4, "window": 4, "stride": 2},
                                 models=models, limit=limit)
        return execute(tiny_dataset, tiny_index, config, out, cache=ResponseCache(tmp_path / "c.sqlite"),
                       log=lambda *_: None)

    first = run(tmp_path / "first", 2)
    assert first["mean_model_calls"] > 0 and loads == [model]
    replay = run(tmp_path / "replay", 2)
    assert replay["mean_model_calls"] == 0 and replay["mean_cache_hits"] == first["mean_model_calls"]
    assert loads == [model]  # no second load
    assert (tmp_path / "replay" / "run.trec").read_bytes() == (tmp_path / "first" / "run.trec").read_bytes()
    more = run(tmp_path / "more", 3)  # a third query's prompts are not in the cache
    assert more["mean_model_calls"] > 0 and loads == [model] * 2


def test_an_export_replaced_before_its_weights_load_is_refused(tiny_bert_dir, tmp_path):
    """The id is read when the backend is built, the weights when the cache first misses: an export written again
    in between (new weights, new manifest) would answer under the old model's id, so it is refused."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from garen_infer.errors import GarenError
    from garen_infer.llm.backends.cross_encoder import CrossEncoderBackend
    from garen_infer.llm.exported_models import KIND
    from garen_train.scorers.export_folder import write_manifest

    out = _cross_encoder(tiny_bert_dir, tmp_path / "reranker")
    manifest = {"kind": KIND, "family": "cross-encoder", "format": "hf-sequence-classification", "max_length": 64}
    write_manifest(out, manifest)
    backend = CrossEncoderBackend(str(out), device="cpu")
    net = AutoModelForSequenceClassification.from_pretrained(out)
    with torch.no_grad():
        net.classifier.bias += 1.0
    net.save_pretrained(out)
    write_manifest(out, manifest)
    with pytest.raises(GarenError,
                       match=r"the model loaded is not the one its id cross-encoder:.*@[0-9a-f]{12}:max64 names"):
        backend.score_pairs([("q", "a document")])
    assert CrossEncoderBackend(str(out), device="cpu").id != backend.id  # built again, it names the new weights


def test_a_full_or_damaged_cache_file_is_one_line(tmp_path):
    """A real full disk (RLIMIT_FSIZE: SQLite's next write fails in the kernel) and a file cut short, in a
    process of their own; each ends with one GarenError line naming the cache file."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    script = (
        "import resource, signal, sys\n"
        "from garen_infer.errors import GarenError\n"
        "from garen_infer.llm.cache import ResponseCache\n"
        "cache = ResponseCache(sys.argv[1])\n"
        "cache.put_many({'a': {'text': 'x'}})\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))\n"
        "try:\n"
        "    for i in range(50):\n"
        "        cache.put_many({f'k{i}-{j}': {'text': 'y' * 10_000} for j in range(10)})\n"
        "except GarenError as err:\n"
        "    print(err)\n"
    )
    path = tmp_path / "responses.sqlite"
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True,
                          env={"PYTHONPATH": str(repo)}, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == (f"response cache {path}: cannot write it (disk I/O error); free some space or fix "
                           "the permissions (or pass another --cache, or --no-cache) and run the same command again\n")
    assert ResponseCache(path).get_many(["a"]) == {"a": {"text": "x"}}  # what was stored before stays readable

    cut = tmp_path / "cut.sqlite"
    filled = ResponseCache(cut)
    filled.put_many({f"k{i}": {"text": "z" * 1000} for i in range(300)})
    filled._db.close()  # the write-ahead log is folded into the file, which is then cut
    with open(cut, "r+b") as handle:
        handle.truncate(100_000)
    from garen_infer.errors import GarenError

    with pytest.raises(GarenError,
                       match=f"response cache {cut}: cannot (open|read) it \\(database disk image is malformed\\); "
                             "it holds only cached model answers"):
        len(ResponseCache(cut))


def test_a_nan_score_is_never_ranked_on_nor_cached(tmp_path):
    """A yes/no scorer whose log-probs come back NaN (fp16 overflow): the answer reads as the lowest score, is
    counted, and the cache does not keep it, so a rerun asks the model again."""
    from garen_infer.llm.ledger import QueryLedger
    from garen_infer.llm.roles import LLMYesNoScorer
    from garen_infer.llm.types import Completion, ScoreJob

    class NanOnLava:
        id = "nan-on-lava"

        def __init__(self):
            self.prompts = 0

        def score_yes_no(self, chats, prefix):
            self.prompts += len(chats)
            return [Completion(score=float("nan") if "lava" in chat[-1]["content"] else 0.8) for chat in chats]

    inner = NanOnLava()
    scorer = LLMYesNoScorer(CachedBackend(inner, ResponseCache(tmp_path / "cache")))
    jobs = [ScoreJob("q", "lava flows"), ScoreJob("q", "plant cells")]
    for expected_prompts in (2, 3):  # the second time only the NaN pair reaches the model
        lava, plants = scorer.score(jobs)
        assert (lava.score, lava.problems, plants.score, plants.problems) == (0.0, ["not_a_number"], 0.8, [])
        assert inner.prompts == expected_prompts
    ledger = QueryLedger()
    ledger.record("navigator", lava)
    assert ledger.summary()["problems"] == {"not_a_number": 1}
