"""Helpers of the training tests: write a garen-train config for the tiny models and run the CLI in process."""

from __future__ import annotations

from pathlib import Path

import yaml


def write_config(path: Path, model: dict, data: dict, root: Path, **trainer) -> Path:
    """A LightningCLI config: ``model`` and ``data`` are {class_path, init_args}; checkpoints go to root/ckpt,
    one per epoch (epoch=N.ckpt), CSV logs to root/logs."""
    config = {
        "seed_everything": 0,
        "trainer": {
            "accelerator": "cpu", "devices": 1, "max_epochs": 1, "log_every_n_steps": 1, "enable_progress_bar": False,
            "enable_model_summary": False, "num_sanity_val_steps": 0, "default_root_dir": str(root),
            "logger": {"class_path": "lightning.pytorch.loggers.CSVLogger",
                       "init_args": {"save_dir": str(root / "logs"), "name": "run"}},
            "callbacks": [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                           "init_args": {"dirpath": str(root / "ckpt"), "filename": "{epoch}", "save_top_k": -1}}],
            **trainer,
        },
        "model": model,
        "data": data,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def lm_model(model_dir: Path, **options) -> dict:
    init = {"model": str(model_dir), "max_length": 256, "lora_r": 4, "lora_alpha": 8, "lora_dropout": 0.0,
            "objective": {"loss": "listwise", "lr": 5e-3, "warmup_ratio": 0.0}, **options}
    return {"class_path": "garen_train.scorers.causal_lm.YesNoLoRAScorer", "init_args": init}


def cross_encoder_model(model_dir: Path, **options) -> dict:
    init = {"model": str(model_dir), "max_length": 64,
            "objective": {"loss": "listwise", "lr": 3e-3, "warmup_ratio": 0.0}, **options}
    return {"class_path": "garen_train.scorers.cross_encoder.CrossEncoderScorer", "init_args": init}


def pairs_data(path: Path, **options) -> dict:
    init = {"path": str(path), "val_fraction": 0.25, "list_size": 3, "batch_size": 2, "eval_batch_size": 16, **options}
    return {"class_path": "garen_train.pairs_data.MinedPairsDataModule", "init_args": init}


def garen_train(*argv: str) -> int:
    from garen_train.cli import main

    return main([str(a) for a in argv])
