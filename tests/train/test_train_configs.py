"""Every shipped training config parses with LightningCLI (class paths import, every init arg is known and typed)
and names a module that garen-train export can export."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml
from train_support import garen_train

from garen_train.export import Exportable

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs" / "train").glob("*.yaml"))


def test_training_configs_ship():
    assert CONFIGS


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_training_config_parses(path, capsys):
    with pytest.raises(SystemExit) as done:
        garen_train("fit", "--config", path, "--print_config")
    assert done.value.code in (0, None)
    printed = yaml.safe_load(capsys.readouterr().out)
    module_name, _, name = printed["model"]["class_path"].rpartition(".")
    assert issubclass(getattr(importlib.import_module(module_name), name), Exportable)
    assert printed["data"]["class_path"] in ("garen_train.pairs_data.MinedPairsDataModule",
                                             "garen_train.partition.data.PartitionData")


@pytest.mark.parametrize("help_flag", ["-h", "--help"])
def test_export_help_needs_no_checkpoint(help_flag, capsys):
    """Was: "garen-train export: error: the following arguments are required: --checkpoint" (exit 2)."""
    with pytest.raises(SystemExit) as done:
        garen_train("export", help_flag)
    printed = capsys.readouterr()
    assert done.value.code == 0 and printed.err == ""
    assert (
        "--checkpoint CHECKPOINT" in printed.out
        and "'garen-train export --checkpoint CKPT -h'" in " ".join(printed.out.split())
    )
    with pytest.raises(SystemExit) as done:  # without -h, a checkpoint is still required
        garen_train("export", "--out", "somewhere")
    assert done.value.code == 2 and "the following arguments are required: --checkpoint" in capsys.readouterr().err


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_no_shipped_config_pins_where_its_logs_go(path):
    """The loggers' folder (and so the checkpoints') follows --trainer.default_root_dir."""
    loggers = yaml.safe_load(path.read_text())["trainer"].get("logger") or []
    assert all("save_dir" not in (logger.get("init_args") or {}) for logger in loggers)


def test_a_fit_writes_under_default_root_dir_and_prints_no_library_chatter(tiny_pairs, tiny_bert_dir, tmp_path, capfd):
    from train_support import cross_encoder_model, pairs_data, write_config

    config = yaml.safe_load(write_config(tmp_path / "config.yaml", cross_encoder_model(tiny_bert_dir),
                                         pairs_data(tiny_pairs / "documents.jsonl"), tmp_path / "pinned").read_text())
    config["trainer"].pop("default_root_dir")
    config["trainer"]["logger"] = [{"class_path": "garen_train.loggers.CSVLogger", "init_args": {"name": "csv"}}]
    config["trainer"]["callbacks"] = [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                                       "init_args": {"save_last": True}}]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    moved = tmp_path / "moved"
    assert garen_train("fit", "--config", tmp_path / "config.yaml", f"--trainer.default_root_dir={moved}") == 0
    assert (moved / "csv" / "version_0" / "metrics.csv").is_file()
    assert (moved / "csv" / "version_0" / "checkpoints" / "last.ckpt").is_file()
    printed = "".join(capfd.readouterr())
    assert "LOAD REPORT" not in printed and "Tip:" not in printed and "Loading weights" not in printed
