"""Presets: YAML files in ``configs/`` (or any path) holding the index stages, the first stage, the models per
role and per-method options. ``--set a.b=value`` overrides single fields from the command line."""

from __future__ import annotations

from pathlib import Path

import yaml

from garen_infer.errors import GarenError

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
DEFAULT_PRESET = "cpu-default"


def preset_path(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    candidate = CONFIG_DIR / f"{name_or_path}.yaml"
    if candidate.is_file():
        return candidate
    known = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
    raise GarenError(f"no preset '{name_or_path}': not a YAML file, and not one of {', '.join(known)} in {CONFIG_DIR}")


def load_preset(name_or_path: str = DEFAULT_PRESET, overrides: list[str] = ()) -> dict:
    path = preset_path(name_or_path)
    try:
        preset = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise GarenError(f"{path}: not valid YAML ({err})") from err
    if not isinstance(preset, dict):
        raise GarenError(f"{path}: expected a mapping at the top level")
    for item in overrides:
        apply_override(preset, item)
    return preset


def apply_override(preset: dict, item: str) -> None:
    """``methods.garen.tau_switch=2`` sets preset["methods"]["garen"]["tau_switch"] = 2 (value parsed as YAML)."""
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise GarenError(f"--set '{item}': expected KEY=VALUE, e.g. methods.garen.tau_switch=2")
    node = preset
    *parents, leaf = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise GarenError(f"--set '{item}': '{part}' is not a section")
    node[leaf] = yaml.safe_load(raw)
