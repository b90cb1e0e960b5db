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
