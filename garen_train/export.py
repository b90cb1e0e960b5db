"""``garen-train export --checkpoint CKPT [options]``: a trained checkpoint becomes what garen-infer loads.

The checkpoint names its own LightningModule (LightningCLI saves the class path in its hyper-parameters), and
that class says which options its export takes and what it writes, through the ``Exportable`` protocol:
a navigator or reranker writes a PEFT adapter and/or merged HF weights, a soft partition writes a groups stage
into an index folder. Every export writes a manifest next to what it exports. The checkpoint is read without
running code from it (``garen_train/checkpoint_file.py``) unless ``--trust-checkpoint`` says its author is trusted.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Protocol, runtime_checkable

from garen_infer.errors import GarenError
from garen_infer.storage.atomic import remove_dead_writers_temporaries
from garen_train import hub
from garen_train.checkpoint_file import TRUST_OPTION, read_checkpoint


@runtime_checkable
class Exportable(Protocol):
    @classmethod
    def add_export_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add this job's export options (e.g. --out, --format) to ``parser``."""

    def export(self, args: argparse.Namespace) -> dict:
        """Write the export and return its manifest (also written to disk next to the export)."""


def import_job_class(path: Path, trust: bool = False) -> None:
    """Import the module of the checkpoint's LightningModule when it is one of garen_train's jobs: Lightning
    (2.6.6 on) restores only classes already imported, and a fresh ``garen-train export`` process has none.
    Reading the checkpoint here also refuses one that holds anything but what our jobs save, before Lightning
    reads it."""
    hyper_parameters = read_checkpoint(path, trust, mmap=True).get("hyper_parameters") or {}
    module = str(hyper_parameters.get("_class_path", "")).rpartition(".")[0]
    if module.startswith("garen_train."):  # our own code only: the allowlist stays Lightning's for anything else
        importlib.import_module(module)


def load_module(checkpoint: str | Path, trust: bool = False):
    """The LightningModule a checkpoint was trained as, restored from it (on CPU); unpickled in full (running
    whatever code it names) only with ``trust``."""
    from lightning.pytorch import LightningModule

    path = Path(checkpoint)
    if not path.is_file():
        raise GarenError(f"{path}: no such checkpoint file")
    try:
        import_job_class(path, trust)
        return LightningModule.load_from_checkpoint(path, map_location="cpu", weights_only=not trust)
    except (KeyError, RuntimeError, ValueError, TypeError, AttributeError, ImportError, EOFError) as err:
        raise GarenError(f"{path}: not a checkpoint written by 'garen-train fit' ({err})") from err


def main(argv: list[str]) -> int:
    first = argparse.ArgumentParser(prog="garen-train export", add_help=False)
    first.add_argument("--checkpoint", required=True, help="a .ckpt written by 'garen-train fit'")
    first.add_argument(TRUST_OPTION, action="store_true",
                       help="unpickle the checkpoint in full, running any code it names: only for a file "
                       "whose author you trust")
    if not _names_a_checkpoint(argv):
        _common_options(first).parse_args(argv)  # -h prints the help and exits; anything else: --checkpoint is required
    known, _ = first.parse_known_args(argv)
    module = load_module(known.checkpoint, known.trust_checkpoint)
    if not isinstance(module, Exportable):
        raise GarenError(f"{known.checkpoint}: a {type(module).__name__} has no export")
    parser = argparse.ArgumentParser(prog="garen-train export", parents=[first], description=__doc__)
    type(module).add_export_arguments(parser)
    hub.add_arguments(parser)
    args = parser.parse_args(argv)
    hub.check_arguments(args)
    if getattr(args, "out", None):
        remove_dead_writers_temporaries(Path(args.out))  # an earlier export killed mid-write (gigabytes of weights)
    manifest = module.export(args)
    shared = hub.share(manifest, args)  # the model card, and the upload when asked for
    print(how_to_load(manifest, args))
    if shared.get("model_card"):
        print(f"model card: {shared['model_card']}")
    if shared.get("pushed"):
        print(f"pushed to {shared['pushed']['url']} (commit {shared['pushed']['commit']})")
    return 0


def _names_a_checkpoint(argv: list[str]) -> bool:
    return any(word == "--checkpoint" or word.startswith("--checkpoint=") for word in argv)


def _common_options(first: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The parser of a command line without a checkpoint: ``-h`` prints the options every export takes (the job's
    own ones depend on the checkpoint); anything else is the usual "--checkpoint is required" error."""
    return argparse.ArgumentParser(
        prog="garen-train export", parents=[first], description=__doc__,
        epilog="Each job adds its own options (--out, --format, --index, ...): "
        "'garen-train export --checkpoint CKPT -h' lists those of CKPT's job.",
    )


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
        text = spec if isinstance(spec, str) else yaml.safe_dump(spec, default_flow_style=True, width=10**6,
                                                                 sort_keys=False).strip()
        lines.append(f"  {name}: {text}")
    if manifest.get("non_regression"):
        from garen_train.scorers.guard import describe

        lines.append(describe(manifest["non_regression"]))
    return "\n".join(lines)
