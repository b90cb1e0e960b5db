"""The training configs' loggers: Lightning's CSV and TensorBoard loggers whose ``save_dir`` may be left out, in
which case ``garen-train`` sets it to ``trainer.default_root_dir`` (``cli.GarenCLI``). The checkpoints go in the
first logger's folder, so one override, ``--trainer.default_root_dir``, moves the logs and the checkpoints."""

from __future__ import annotations

from lightning.pytorch import loggers


class CSVLogger(loggers.CSVLogger):
    def __init__(self, save_dir: str | None = None, name: str | None = "csv",
                 version: int | str | None = None, prefix: str = "",
                 flush_logs_every_n_steps: int = 100):
        super().__init__(save_dir or ".", name, version, prefix, flush_logs_every_n_steps)


class TensorBoardLogger(loggers.TensorBoardLogger):
    def __init__(self, save_dir: str | None = None, name: str | None = "tensorboard", version: int | str | None = None,
                 log_graph: bool = False, default_hp_metric: bool = True, prefix: str = "", sub_dir: str | None = None):
        super().__init__(save_dir or ".", name, version, log_graph, default_hp_metric, prefix, sub_dir)
