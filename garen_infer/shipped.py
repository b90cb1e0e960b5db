"""Where a shipped preset's own files live, whatever the working folder: a shipped preset names a checkpoint as
``checkpoints/<name>``, relative to the project (a checkout's top folder, or the installed package's folder), never
to the folder the command runs in. A user's own preset, and ``--set``, keep paths relative to the working folder.

The checkpoints the CPU presets read are all-MiniLM-L6-v2 fine-tuned whole (about 87 MB each): too large to ship
in the package, so a missing one is reported with the command that builds it."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

PACKAGE = Path(str(resources.files("garen_infer"))).resolve()  # the package folder, wherever this module sits in it
PACKAGED_PRESETS = PACKAGE / "configs"  # an installed wheel: copied there at build time (setup.py)
CONFIG_DIR = PACKAGED_PRESETS if PACKAGED_PRESETS.is_dir() else PACKAGE.parent / "configs"  # a checkout
PROJECT_ROOT = CONFIG_DIR.parent  # a checkout: its top folder; a wheel: the garen_infer package folder
CHECKPOINTS = "checkpoints/"

# a shipped checkpoint -> (the preset that reads it, how to build it)
BUILT_BY = {
    "checkpoints/cpu-navigator": ("cpu-trained",
                                  "make cpu-navigator (scripts/train_cpu_navigator.sh, about 30 min on 2 cores)"),
    "checkpoints/cpu-adapted": ("cpu-adapted", "make adapt-navigator DATASET=<a BEIR folder>"),
}


def is_shipped(path: Path) -> bool:
    return path.resolve().is_relative_to(CONFIG_DIR.resolve())


def anchor_checkpoints(preset: dict) -> dict:
    """``preset`` (a shipped one, as read) with each ``models.<role>.model`` under ``checkpoints/`` made absolute
    under ``PROJECT_ROOT``."""
    for spec in (preset.get("models") or {}).values():
        model = spec.get("model") if isinstance(spec, dict) else None
        if isinstance(model, str) and model.startswith(CHECKPOINTS):
            spec["model"] = str(PROJECT_ROOT / model)
    return preset


def missing_checkpoint_advice(model: str) -> str | None:
    """How to build ``model`` when it is a shipped preset's checkpoint that is not there, else None."""
    for relative, (preset, build) in BUILT_BY.items():
        if Path(model) == PROJECT_ROOT / relative and not Path(model).exists():
            return (
                f"the {preset} preset's navigator {relative} is not built (it is not shipped: 87 MB); in a checkout "
                f"run {build}, or point the preset at your own export with --set models.navigator.model=<folder>"
            )
    return None


def presets_with_stage(stage: str) -> list[str]:
    """The shipped presets whose index builds ``stage``, cpu presets first (they run anywhere)."""
    names = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
    having = [name for name in names if stage in _index_section(name)]
    return sorted(having, key=lambda name: not name.startswith("cpu") and not name.endswith("-cpu"))


def _index_section(name: str, seen: tuple[str, ...] = ()) -> dict:
    """A shipped preset's ``index`` section with what it ``extends`` filled in (shipped files: plain YAML)."""
    path = CONFIG_DIR / f"{name}.yaml"
    preset = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() and name not in seen else None
    if not isinstance(preset, dict):
        return {}
    base = preset.get("extends")
    inherited = _index_section(base, (*seen, name)) if isinstance(base, str) else {}
    return {**inherited, **(preset.get("index") or {})}
