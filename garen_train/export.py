"""``garen-train export --checkpoint CKPT [options]``: a trained checkpoint becomes what garen-infer loads.

The checkpoint names its own LightningModule (LightningCLI saves the class path in its hyper-parameters), and
that class says which options its export takes and what it writes, through the ``Exportable`` protocol:
a navigator or reranker writes a PEFT adapter and/or merged HF weights, a soft partition writes a groups stage
into an index folder. Every export writes a manifest next to what it exports.
"""

from __future__ import annotations

import argparse
import importlib
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


def import_job_class(path: Path) -> None:
    """Import the module of the checkpoint's LightningModule when it is one of garen_train's jobs: Lightning
    (2.6.6 on) restores only classes already imported, and a fresh ``garen-train export`` process has none."""
    import torch

    hyper_parameters = torch.load(path, map_location="cpu", weights_only=False, mmap=True).get("hyper_parameters") or {}
    module = str(hyper_parameters.get("_class_path", "")).rpartition(".")[0]
    if module.startswith("garen_train."):  # our own code only: the allowlist stays Lightning's for anything else
        importlib.import_module(module)


def load_module(checkpoint: str | Path):
    """The LightningModule a checkpoint was trained as, restored from it (on CPU)."""
    from lightning.pytorch import LightningModule

    path = Path(checkpoint)
    if not path.is_file():
        raise GarenError(f"{path}: no such checkpoint file")
    try:
        import_job_class(path)
        return LightningModule.load_from_checkpoint(path, map_location="cpu", weights_only=False)
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
    print(how_to_load(module.export(args), args))
    return 0


def how_to_load(manifest: dict, args: argparse.Namespace) -> str:
    """What ``garen-train export`` prints: where the export is and the role specs (or index stage) that load it;
    the rest of the manifest (data, validation figures, digests) stays in the manifest file."""
    import yaml

    if "stage" in manifest:  # a learned groups stage, written into an index folder
        return (f"{manifest['index']}: stage '{manifest['stage']}' written to manifest.json "
                f"({manifest['info']['groups']} groups); use it with --set methods.garen.groups={manifest['stage']}")
    lines = [f"{Path(args.out).resolve()}: exported (manifest.json holds the rest); load it with a role spec "
             f"(models.<role>: ..., e.g. navigator, or reranker with mode: pointwise):"]
    for name, spec in manifest.get("use", {}).items():
        text = spec if isinstance(spec, str) else yaml.safe_dump(spec, default_flow_style=True, width=10**6, sort_keys=False).strip()
        lines.append(f"  {name}: {text}")
    return "\n".join(lines)
