"""``garen-train export --checkpoint CKPT [options]``: a trained checkpoint becomes what garen-infer loads.

The checkpoint names its own LightningModule (LightningCLI saves the class path in its hyper-parameters), and
that class says which options its export takes and what it writes, through the ``Exportable`` protocol:
a navigator or reranker writes a PEFT adapter and/or merged HF weights, a soft partition writes a groups stage
into an index folder. Every export writes a manifest next to what it exports.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Protocol, runtime_checkable

from garen_infer.errors import GarenError


@runtime_checkable
class Exportable(Protocol):
    @classmethod
    def add_export_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add this job's export options (e.g. --out, --format) to ``parser``."""

    def export(self, args: argparse.Namespace) -> dict:
        """Write the export and return its manifest (also written to disk next to the export)."""


def load_module(checkpoint: str | Path):
    """The LightningModule a checkpoint was trained as, restored from it (on CPU).

    LightningCLI records the module's class path in the checkpoint's hyper-parameters; that module is imported
    first, because Lightning restores only classes already imported (its guard against arbitrary classes)."""
    import importlib

    import torch
    from lightning.pytorch import LightningModule

    path = Path(checkpoint)
    if not path.is_file():
        raise GarenError(f"{path}: no such checkpoint file")
    try:
        saved = torch.load(path, map_location="cpu", weights_only=False, mmap=True)
        class_path = (saved.get("hyper_parameters") or {}).get("_class_path")
        cls = LightningModule
        if class_path:
            module_name, _, name = class_path.rpartition(".")
            cls = getattr(importlib.import_module(module_name), name)
        del saved
        return cls.load_from_checkpoint(path, map_location="cpu", weights_only=False)
    except (KeyError, RuntimeError, ValueError, TypeError, AttributeError, ImportError, EOFError) as err:
        raise GarenError(f"{path}: not a checkpoint written by 'garen-train fit' ({err})") from err


def main(argv: list[str]) -> int:
    first = argparse.ArgumentParser(prog="garen-train export", add_help=False)
    first.add_argument("--checkpoint", required=True, help="a .ckpt written by 'garen-train fit'")
    known, _ = first.parse_known_args(argv)
    module = load_module(known.checkpoint)
    if not isinstance(module, Exportable):
        raise GarenError(f"{known.checkpoint}: a {type(module).__name__} has no export")
    parser = argparse.ArgumentParser(prog="garen-train export", parents=[first], description=__doc__)
    type(module).add_export_arguments(parser)
    args = parser.parse_args(argv)
    import json

    print(json.dumps(module.export(args), indent=2, default=str))
    return 0
