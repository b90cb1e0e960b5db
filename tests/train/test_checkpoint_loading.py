"""Checkpoints are read without running code from them: a crafted ``.ckpt`` whose hyper-parameters hold an object
with a malicious ``__reduce__`` is refused in one line by ``garen-train export`` and by ``garen-train fit
--ckpt_path``, and what it would have run never runs; a type our jobs never save is refused even where torch's
weights-only loader would build it."""

from __future__ import annotations

import collections
import json
import os

import pytest
import torch
from conftest import one_error_line
from train_support import cross_encoder_model, garen_train, pairs_data, write_config

from garen_infer.errors import GarenError
from garen_train.checkpoint_file import read_checkpoint


class WritesAMarker:
    """Unpickled in full, this runs a shell command that writes ``marker``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def crafted_checkpoint(tmp_path, payload) -> str:
    """A file shaped like a scorer's checkpoint, with ``payload`` among its hyper-parameters."""
    path = tmp_path / "crafted.ckpt"
    torch.save({"state_dict": {"net.weight": torch.zeros(2)}, "pytorch-lightning_version": "2.6.6",
                "hyper_parameters": {"_class_path": "garen_train.scorers.cross_encoder.CrossEncoderScorer",
                                     "model": payload}}, path)
    return str(path)


def test_export_refuses_a_checkpoint_that_would_run_code(tmp_path, capsys):
    marker = tmp_path / "marker"
    checkpoint = crafted_checkpoint(tmp_path, WritesAMarker(marker))
    assert garen_train("export", "--checkpoint", checkpoint, "--out", tmp_path / "out") == 2
    assert not marker.exists()
    err = one_error_line(capsys, "garen-train export")
    assert (
        f"{checkpoint}: refused to load: it holds '{os.system.__module__}.system'" in err
        and "--trust-checkpoint" in err
    )
    assert not (tmp_path / "out").exists()


def test_resuming_a_fit_refuses_a_checkpoint_that_would_run_code(tiny_pairs, tiny_bert_dir, tmp_path, capsys):
    marker = tmp_path / "marker"
    checkpoint = crafted_checkpoint(tmp_path, WritesAMarker(marker))
    config = write_config(tmp_path / "config.yaml", cross_encoder_model(tiny_bert_dir),
                          pairs_data(tiny_pairs / "documents.jsonl"), tmp_path)
    assert garen_train("fit", "--config", config, "--ckpt_path", checkpoint) == 2
    assert not marker.exists()
    err = one_error_line(capsys, "garen-train fit")
    assert "refused to load" in err and "--trust-checkpoint" not in err  # fit has no such option


def test_a_type_our_jobs_never_save_is_refused_though_torch_would_build_it(tmp_path):
    checkpoint = crafted_checkpoint(tmp_path, collections.Counter(a=1))  # in torch's weights-only allowlist
    with pytest.raises(GarenError,
                       match=r"it holds a collections\.Counter at checkpoint\['hyper_parameters'\]\['model'\]"):
        read_checkpoint(checkpoint)
    assert read_checkpoint(checkpoint, trust=True)["hyper_parameters"]["model"] == collections.Counter(a=1)


def test_weights_copied_over_an_export_in_place_are_refused(tmp_path):
    """An in-place copy keeps the file's name and inode but not its mtime and ctime: the digest is taken again."""
    from garen_infer.llm.exported_models import KIND, MANIFEST, weights_digest, weights_tag

    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"trained" * 1000)
    (tmp_path / MANIFEST).write_text(json.dumps({"kind": KIND, "weights_sha256": weights_digest(tmp_path)}))
    assert weights_tag(tmp_path) == f"@{weights_digest(tmp_path)[:12]}"
    inode = weights.stat().st_ino
    with open(weights, "r+b") as handle:  # what `cp new.safetensors model.safetensors` does: same file, new bytes
        handle.write(b"TRAINED")
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # a later second, on any clock
    assert weights.stat().st_ino == inode
    with pytest.raises(GarenError, match="they were replaced after 'garen-train export'"):
        weights_tag(tmp_path)
