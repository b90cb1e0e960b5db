"""Presets: YAML files in ``configs/`` (or any path) holding the index stages, the first stage, the models per
role and per-method options. ``--set a.b=value`` overrides single fields from the command line. A preset is
checked field by field (``garen_infer/settings.py``) as it loads, before any data or model is touched."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from garen_infer.configuration.run_config import RUN_SECTION, RunConfig
from garen_infer.configuration.safe_yaml import load_yaml
from garen_infer.configuration.shards import parse_shard
from garen_infer.errors import GarenError
from garen_infer.shipped import CONFIG_DIR, anchor_checkpoints, is_shipped

DEFAULT_PRESET = "cpu-default"


SHIPPED_KINDS = {"": "presets (--preset NAME)",
                 "bench": "bench files (garen-infer bench --config <that folder>/FILE)",
                 "train": "training jobs (garen-train fit --config <that folder>/FILE)"}


def shipped_configs() -> dict[str, list[tuple[str, str]]]:
    """The YAML files this install ships, by kind (``SHIPPED_KINDS``): (a preset's name, or a file's path in
    ``CONFIG_DIR``; the file's first comment line, which says what it is)."""
    shipped = {}
    for folder, kind in SHIPPED_KINDS.items():
        files = sorted((CONFIG_DIR / folder).glob("*.yaml"))
        names = [f.relative_to(CONFIG_DIR).as_posix() if folder else f.stem for f in files]
        shipped[kind] = [(name, _first_comment(f)) for name, f in zip(names, files)]
    return shipped


def _first_comment(path: Path) -> str:
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    return first.removeprefix("#").strip() if first.startswith("#") else ""


def preset_path(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    candidate = CONFIG_DIR / f"{name_or_path}.yaml"
    if candidate.is_file():
        return candidate
    from garen_infer.settings import did_you_mean

    known = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
    raise GarenError(f"no preset '{name_or_path}'{did_you_mean(name_or_path, known)}: not a YAML file, and not one of "
                     f"{', '.join(known)} in {CONFIG_DIR}")


def load_preset(name_or_path: str = DEFAULT_PRESET, overrides: Sequence[str] | Mapping = ()) -> dict:
    """A preset, checked. ``overrides``: ``KEY=VALUE`` strings as ``--set`` takes them (values parsed as YAML), or
    a mapping of keys to values already parsed (the Python API's ``{"methods.garen.tau_switch": 2}``)."""
    preset = apply_overrides(read_preset(preset_path(name_or_path)), overrides)
    check_preset(preset)
    return preset


def read_preset(path: Path, extended_by: tuple[Path, ...] = ()) -> dict:
    """A preset file with what it ``extends`` filled in: ``extends: cpu-default`` (a preset name, or a path
    relative to the file) starts from that preset, and this file's keys replace its keys, mapping by mapping,
    except that a model role (``models.<role>``) is replaced whole: its fields belong to one backend. A shipped
    preset's checkpoints are found beside the package, not in the working folder (``garen_infer/shipped.py``)."""
    preset = read_yaml_mapping(path)
    if is_shipped(path):
        preset = anchor_checkpoints(preset)
    base = preset.pop("extends", None)
    if base is None:
        return preset
    if not isinstance(base, str):
        raise GarenError(f"{path}: extends must name one preset, not {base!r}")
    sibling = path.parent / base
    base_path = sibling if sibling.suffix in (".yaml", ".yml") and sibling.is_file() else preset_path(base)
    chain = (*extended_by, path.resolve())
    if base_path.resolve() in chain:
        raise GarenError(f"{path}: extends {base}, which extends {path.name} again")
    base_preset = read_preset(base_path, chain)
    roles = {**(base_preset.get("models") or {}), **(preset.pop("models", None) or {})}
    return {**merged(base_preset, preset), **({"models": roles} if roles else {})}


def merged(base: dict, changes: dict) -> dict:
    """``base`` with ``changes`` written over it: mappings merge key by key, anything else is replaced."""
    out = dict(base)
    for key, value in changes.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def run_config_from(preset: dict, method: str, budget: int | None = None, limit: int | None = None,
                    max_active: int | None = None, shard: str | None = None) -> RunConfig:
    """The one way a preset becomes a run's configuration, whichever door asked (CLI, Python API, PyTerrier,
    bench, demo): the method's options, the first stage, the models and the preset's run section, with
    ``budget``, ``limit``, ``max_active`` (queries in flight) and ``shard`` ("I/N") overriding the preset
    where given."""
    run_opts = dict(preset.get("run") or {})
    if max_active is not None:
        run_opts["max_active_queries"] = max_active
    if limit is not None:
        run_opts["limit"] = limit
    if shard is not None:
        run_opts["shard"] = str(parse_shard(shard))  # a malformed I/N is refused before anything loads
    options = (preset.get("methods") or {}).get(method)
    first_stage, models = preset.get("first_stage"), preset.get("models")
    return RunConfig.build(method, options, budget, first_stage, models, **run_opts)


def read_yaml_mapping(path: Path, overrides: Sequence[str] | Mapping = ()) -> dict:
    """A YAML file holding a mapping (a preset, a bench file), with ``--set`` overrides (or a mapping) applied."""
    try:
        mapping = load_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise GarenError(f"{path}: not valid YAML ({err})") from err
    if not isinstance(mapping, dict):
        raise GarenError(f"{path}: expected a mapping at the top level")
    return apply_overrides(mapping, overrides)


def apply_overrides(mapping: dict, overrides: Sequence[str] | Mapping) -> dict:
    if isinstance(overrides, Mapping):
        for key, value in overrides.items():
            set_field(mapping, str(key), value, f"override '{key}'")
    else:
        for item in overrides:
            apply_override(mapping, item)
    return mapping


PRESET_SECTIONS = ("index", "first_stage", "models", "run", "methods")

# run: keys that the command line or another section of the preset sets
RUN_KEYS_SET_ELSEWHERE = {"method": "--method", "options": "methods:", "method_options": "methods:",
                          "budget": "--budget", "first_stage": "first_stage:", "models": "models:",
                          "shard": "--shard"}


def check_preset(preset: dict) -> None:
    """Every key and value of a preset, against its config field (a model role against its backend's fields): one
    ``GarenError`` line naming the key, the value and what is allowed, with the nearest key for a typo."""
    from garen_infer.index.first_stage import FirstStageConfig
    from garen_infer.index.stages import IndexConfig
    from garen_infer.llm.model_specs import check_model_spec
    from garen_infer.methods.base import METHODS, get_method
    from garen_infer.settings import refuse_unknown, validate

    refuse_unknown(preset, PRESET_SECTIONS, "", "section of a preset")
    IndexConfig.from_dict(_section(preset, "index"))
    validate(FirstStageConfig, preset.get("first_stage"), "first_stage")
    run = _section(preset, "run")
    for key in sorted(set(run) & set(RUN_KEYS_SET_ELSEWHERE)):
        raise GarenError(f"invalid setting run.{key}: it is set by {RUN_KEYS_SET_ELSEWHERE[key]}, not under run")
    refuse_unknown(run, RUN_SECTION, "run")
    validate(RunConfig, run, "run", partial=True)
    for role, spec in _section(preset, "models").items():
        check_model_spec(spec, f"models.{role}")
    methods = _section(preset, "methods")
    refuse_unknown(methods, METHODS, "methods", "method")
    for name, options in methods.items():
        validate(get_method(name).Config, options, f"methods.{name}")


def _section(preset: dict, name: str) -> dict:
    value = preset.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise GarenError(f"invalid setting {name}={value!r}: expected a mapping")
    return value


def apply_override(preset: dict, item: str) -> None:
    """``methods.garen.tau_switch=2`` sets preset["methods"]["garen"]["tau_switch"] = 2 (value parsed as YAML)."""
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise GarenError(f"--set '{item}': expected KEY=VALUE, e.g. methods.garen.tau_switch=2")
    try:
        value = load_yaml(raw)
    except yaml.YAMLError as err:
        problem = str(getattr(err, "problem", None) or err).strip()
        raise GarenError(f"--set '{item}': the value '{raw}' is not valid YAML ({problem})") from None
    set_field(preset, key, value, f"--set '{item}'")


def set_field(preset: dict, key: str, value, where: str) -> None:
    """``set_field(p, "methods.garen.tau_switch", 2, ...)`` sets p["methods"]["garen"]["tau_switch"] = 2."""
    node = preset
    *parents, leaf = key.split(".")
    if not leaf or not all(parents):
        raise GarenError(f"{where}: expected a dotted key such as methods.garen.tau_switch")
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise GarenError(f"{where}: '{part}' is not a section")
    node[leaf] = value
