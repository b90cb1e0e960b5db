"""scripts/gpu_check.py's dry run: every check on the CPU with the presets' models shrunk to two layers, one JSON
document, a missing package a skipped check with its reason (the GPU machine's stock image lacks several)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def checked(gpu_check, capsys, *args) -> tuple[int, dict]:
    status = gpu_check.main(["--cpu-dry-run", *args])
    return status, json.loads(capsys.readouterr().out)  # the whole output is one JSON document


def test_the_dry_run_runs_every_check_on_the_cpu_and_prints_one_json_document(gpu_check, capsys):
    status, report = checked(gpu_check, capsys)
    assert status == 0 and report["dry_run"] and report["device"] == "cpu"
    checks = report["checks"]
    assert {name: c["status"] for name, c in checks.items()} == dict.fromkeys(gpu_check.CHECKS, "pass")
    assert 0 <= checks["yes_no_drift"]["max_dp_yes"] < gpu_check.MAX_DP_BF16
    assert [row["batch"] for row in checks["yes_no_scorer"]["batches"]] == [4, 8]
    assert checks["lora_step"]["trainable_params"] > 0 and checks["lora_step"]["loss_finite"]


def test_the_memory_shares_size_each_presets_engines_from_the_vendored_model_configs(gpu_check, capsys):
    _, report = checked(gpu_check, capsys, "--only", "memory_shares")
    rows = {(r["gpu_gib"], r["preset"], r["engine"]): r for r in report["checks"]["memory_shares"]["engines"]}
    navigator, on_h200 = rows[80, "garen-paper", "models.navigator"], rows[141, "garen-paper", "models.navigator"]
    assert navigator["share_gib"] == 16.0 and 35_000 < navigator["kv_tokens"] < 50_000  # gpu-presets.md: ~40K
    assert on_h200["kv_tokens"] > 2 * navigator["kv_tokens"]
    reranker = rows[80, "garen-paper", "models.reranker"]
    assert reranker["state_gib"] == pytest.approx(4.7, abs=0.1)  # 256 sequences of ~40 MB over two GPUs


def test_a_missing_package_skips_its_check_with_the_reason_never_a_traceback(gpu_check, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "peft", None)  # import peft now raises ImportError, as on the stock image
    status, report = checked(gpu_check, capsys, "--only", "lora_step")
    assert status == 0
    assert report["checks"]["lora_step"]["status"] == "skipped"
    assert report["checks"]["lora_step"]["reason"] == "missing package: peft"
