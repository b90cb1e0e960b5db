"""Every shipped training config parses with LightningCLI (class paths import, every init arg is known and typed)
and names a module that garen-train export can export."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

from garen_train.export import Exportable
from train_support import garen_train

CONFIGS = sorted((Path(__file__).resolve().parent.parent / "configs" / "train").glob("*.yaml"))


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
    assert printed["data"]["class_path"] in ("garen_train.pairs_data.MinedPairsDataModule", "garen_train.partition.data.PartitionData")


@pytest.mark.parametrize("help_flag", ["-h", "--help"])
def test_export_help_needs_no_checkpoint(help_flag, capsys):
    """Was: "garen-train export: error: the following arguments are required: --checkpoint" (exit 2)."""
    with pytest.raises(SystemExit) as done:
        garen_train("export", help_flag)
    printed = capsys.readouterr()
    assert done.value.code == 0 and printed.err == ""
    assert "--checkpoint CHECKPOINT" in printed.out and "'garen-train export --checkpoint CKPT -h'" in " ".join(printed.out.split())
    with pytest.raises(SystemExit) as done:  # without -h, a checkpoint is still required
        garen_train("export", "--out", "somewhere")
    assert done.value.code == 2 and "the following arguments are required: --checkpoint" in capsys.readouterr().err
