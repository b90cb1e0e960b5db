"""``garen-train``: the training half of the toolkit.

    garen-train mine     ...               replay a garen_infer traversal on an index and write training pairs
    garen-train mine-synthetic --corpus DIR ...   the same for a corpus with no judgments: queries written from it
    garen-train merge    SHARD... --out DIR   join the folders of 'mine --shard I/N' into one
    garen-train fit      --config FILE     a Lightning job (also validate, test, predict), driven by LightningCLI:
                                           --print_config, dotted overrides (--trainer.max_epochs=2,
                                           --model.init_args.lr=1e-4), --ckpt_path to resume a run
    garen-train export   --checkpoint CKPT ...   turn a checkpoint into what garen-infer loads
    garen-train evaluate --pairs FILE --model SPEC   any garen-infer scorer (zero-shot or an export) on mined pairs
    garen-train report   --logs DIR ...    loss and validation curves, before/after figures, as a report folder
    garen-train partition-report --index DIR ... groups stages' partition quality and GAREN's App. C.3 counts

Every job's config names its LightningModule and LightningDataModule by class path (``model: {class_path: ...,
init_args: ...}``), so one entry point serves every job and a new job is a module plus a YAML file under
``configs/train/``. A module that can be exported implements the ``Exportable`` protocol of
``garen_train.export``.
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
from pathlib import Path

from garen_infer.errors import GarenError

LIGHTNING_COMMANDS = ("fit", "validate", "test", "predict")
# other subcommands: name -> module with ``main(argv) -> int``
JOBS = {"mine": "garen_train.mine", "mine-synthetic": "garen_train.mine_synthetic", "merge": "garen_train.merge",
        "export": "garen_train.export", "evaluate": "garen_train.evaluate", "report": "garen_train.report",
        "partition-report": "garen_train.partition.report"}


def usage() -> str:
    return (__doc__ or "").strip()


def resumed_checkpoint(argv: list[str]) -> Path | None:
    """The checkpoint file ``--ckpt_path`` names, if it names a file (not 'last', 'best', ...)."""
    for i, arg in enumerate(argv):
        if arg.startswith("--ckpt_path="):
            value = arg.partition("=")[2]
        elif arg == "--ckpt_path" and i + 1 < len(argv):
            value = argv[i + 1]
        else:
            continue
        if Path(value).is_file():
            return Path(value)
    return None


class _Drop(logging.Filter):
    """Drops the log records whose message contains ``marker``; keeps every other line of the logger."""

    def __init__(self, marker: str):
        super().__init__()
        self.marker = marker

    def filter(self, record: logging.LogRecord) -> bool:
        return self.marker not in str(record.msg)


@functools.cache  # once per process: the filters stay on their loggers
def quiet_libraries() -> None:
    """A fit prints the job's own progress and metrics, and an export where it wrote, not the libraries' chatter:
    transformers' per-model load report (a table of the keys a fresh head initialises, expected for every scorer)
    and its "Loading weights" and "Writing model shards" bars, and Lightning's tips ("try installing litlogger /
    litmodels")."""
    import transformers

    transformers.utils.logging.disable_progress_bar()
    for name in ("transformers.modeling_utils", "transformers.modeling_layers", "transformers.integrations.peft"):
        logging.getLogger(name).addFilter(_Drop("LOAD REPORT"))
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logging.getLogger(name).addFilter(_Drop("Tip:"))


def run_lightning(argv: list[str]):
    """LightningCLI in subclass mode: the config picks the module and data classes. A checkpoint to resume from
    is read without running code from it first (Lightning then reads it with torch's weights-only loader too)."""
    import pickle

    from lightning.pytorch import LightningDataModule, LightningModule
    from lightning.pytorch.cli import LightningCLI

    from garen_train.checkpoint_file import read_checkpoint, refusal

    resumed = resumed_checkpoint(argv)
    if resumed is not None:
        read_checkpoint(resumed, mmap=True, offer_trust=False)

    class GarenCLI(LightningCLI):
        def before_instantiate_classes(self) -> None:
            """A logger given no ``save_dir`` (``garen_train.loggers``) writes under ``trainer.default_root_dir``."""
            trainer = (self.config[self.subcommand] if self.subcommand else self.config).trainer
            for logger in trainer.logger if isinstance(trainer.logger, list) else [trainer.logger]:
                init_args = getattr(logger, "init_args", None)
                if init_args is not None and "save_dir" in init_args and init_args.save_dir is None:
                    init_args.save_dir = trainer.default_root_dir or "."

    quiet_libraries()

    # LightningCLI reads sys.argv (and warns if args= is also given). argv[0] stays the real script: DDP starts
    # the other processes by running it again with these arguments.
    saved = sys.argv
    sys.argv = [saved[0] if saved and saved[0] else "garen-train", *argv]
    try:
        return GarenCLI(
            LightningModule, LightningDataModule, subclass_mode_model=True, subclass_mode_data=True,
            save_config_kwargs={"overwrite": True},
        )
    except pickle.UnpicklingError as err:  # a ckpt_path given in the config file rather than on the command line
        raise refusal(Path("the checkpoint to resume from"), err, offer_trust=False) from None
    finally:
        sys.argv = saved


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    command, rest = argv[0], argv[1:]
    try:
        if command in LIGHTNING_COMMANDS:
            run_lightning([command, *rest])
            return 0
        if command in JOBS:
            if command == "export":
                quiet_libraries()  # it prints where the export is and how to load it, not load and save bars
            return importlib.import_module(JOBS[command]).main(rest)
        raise GarenError(f"unknown command '{command}'; choose one of {', '.join([*LIGHTNING_COMMANDS, *JOBS])}")
    except GarenError as err:
        print(f"garen-train {command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"garen-train {command}: interrupted", file=sys.stderr)
        return 130
