"""Settings are checked field by field before anything loads (garen_infer/settings.py).

The table test walks every field of every config the registries know (methods, index stages, plus the first stage,
the run and the sampling params), derives bad values from the field's own declaration and checks each is refused
with one line naming the key and the value. A method or stage registered later is covered without a new test.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Literal, Union

import pytest
from conftest import one_error_line, write_beir

from garen_infer.doors.cli import main
from garen_infer.errors import GarenError
from garen_infer.settings import AtLeast, Below, Count, Probability, Range, build, describe, hints, validate


def registered_configs() -> list[tuple[str, type]]:
    from garen_infer.index.first_stage import FirstStageConfig
    from garen_infer.index.stages import STAGES, load_optional_stages
    from garen_infer.llm.types import SamplingParams
    from garen_infer.methods.base import METHODS, get_method
    from garen_infer.running.runner import RunConfig

    load_optional_stages()
    configs = [("first_stage", FirstStageConfig), ("run", RunConfig), ("models.reranker.sampling", SamplingParams)]
    configs += [(f"methods.{name}", get_method(name).Config) for name in METHODS]
    configs += [(f"index.{name}", stage.params_type) for name, stage in STAGES.items()]
    return configs


def preset_fields(where: str, cls) -> list[str]:
    """The fields a preset section sets (the method, its options, first stage and models have their own)."""
    from garen_infer.configuration.run_config import RUN_SECTION

    return list(RUN_SECTION) if where == "run" else [f.name for f in dataclasses.fields(cls) if f.init]


CONFIGS = registered_configs()
FIELDS = [(where, cls, name) for where, cls in CONFIGS for name in preset_fields(where, cls)]


def _strip(hint):
    return typing.get_args(hint)[0] if typing.get_origin(hint) is Annotated else hint


UNIONS = (Union, types.UnionType)


def _key(value):
    return type(value), repr(value)


def wrong_types(hint) -> list:
    """Values of the wrong kind for a hint (None is wrong unless the hint allows it)."""
    hint = _strip(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in UNIONS:
        arms = [a for a in args if a is not type(None)]
        wrong_for = [{_key(v) for v in wrong_types(arm)} for arm in arms]
        bad = [v for v in wrong_types(arms[0]) if all(_key(v) in keys for keys in wrong_for)]  # wrong for every arm
        return [v for v in bad if not (v is None and type(None) in args)]
    if origin is Literal:
        return ["no-such-choice", None]
    if hint is bool:
        return ["yes", 1, None]
    if hint is int:
        return ["abc", 1.5, True, None]
    if hint is float:
        return ["abc", True, None, float("nan")]
    if hint is str:
        return [5, True, None]
    if hint is dict or origin is dict:
        return [5, "x", None]
    if hint in (list, tuple) or origin in (list, tuple):
        return [5, None]
    return []


def out_of_range(hint, defaults: dict) -> list:
    """Numbers just outside each declared range (a bound that names a field uses that field's default)."""
    bad = []
    for rule in _ranges(hint):
        step = 1 if _number_kind(hint) is int else 0.5
        low, high = _bound(rule.low, defaults), _bound(rule.high, defaults)
        if low is not None:
            bad.append(low if rule.low_open else low - step)
        if high is not None:
            bad.append(high if rule.high_open else high + step)
    return bad


def _ranges(hint) -> list[Range]:
    found = []
    if typing.get_origin(hint) is Annotated:
        found += [m for m in hint.__metadata__ if isinstance(m, Range)]
    for arm in typing.get_args(hint) if typing.get_origin(hint) in UNIONS else ():
        found += _ranges(arm)
    return found


def _number_kind(hint):
    for arm in (typing.get_args(hint) if typing.get_origin(hint) in UNIONS else (hint,)):
        arm = _strip(arm)
        if arm in (int, float):
            return arm
    return float


def _bound(bound, defaults):
    return defaults.get(bound) if isinstance(bound, str) else bound


def _defaults(cls) -> dict:
    return {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}


def test_the_walk_covers_every_registry():
    wheres = [w for w, _ in CONFIGS]
    for expected in ("methods.garen", "methods.rgs", "methods.rerank", "index.bm25", "index.embeddings",
                     "index.knn_graph",
                     "index.groups", "index.proximity_graph"):
        assert expected in wheres


@pytest.mark.parametrize("where, cls", CONFIGS, ids=[w for w, _ in CONFIGS])
def test_defaults_are_allowed(where, cls):
    """Each config's own defaults pass its declarations (a range that refuses its default is a typo)."""
    required = {
        f.name: "x"
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    validate(cls, required, where)


@pytest.mark.parametrize("where, cls, name", FIELDS, ids=[f"{w}.{n}" for w, _, n in FIELDS])
def test_every_field_refuses_bad_values(where, cls, name):
    hint = hints(cls)[name]
    assert describe(hint) != "any value", f"{where}.{name}: the checker does not understand {hint}"
    bad = wrong_types(hint) + out_of_range(hint, _defaults(cls))
    assert bad, f"{where}.{name}: no bad value derives from {hint}"
    for value in bad:
        with pytest.raises(GarenError) as refused:
            validate(cls, {name: value}, where)
        message = str(refused.value)
        assert f"{where}.{name}=" in message and "expected" in message and "\n" not in message, message


def test_a_config_added_later_is_checked_from_its_declarations():
    @dataclass
    class NewMethodConfig:
        budget: Count = 100
        beam: Annotated[int, AtLeast(1), Below("budget")] = 2
        temperature: Probability = 0.5
        mode: Literal["fast", "exact"] = "fast"
        cap: Count | None = None

    assert build(
        NewMethodConfig, {"beam": 3, "temperature": 1, "cap": None}, "methods.new"
    ) == NewMethodConfig(beam=3, temperature=1.0)
    for values, message in [
        ({"beam": 100}, "methods.new.beam=100: expected an integer < budget (100)"),
        ({"budget": 2, "beam": 2}, "methods.new.beam=2: expected an integer < budget (2)"),
        ({"temperature": -0.1}, "methods.new.temperature=-0.1: expected a number in [0.0, 1.0]"),
        ({"mode": "slow"}, "methods.new.mode='slow': expected one of 'fast', 'exact'"),
        ({"cap": 0}, "methods.new.cap=0: expected an integer >= 1"),
        ({"cap": "many"}, "methods.new.cap='many': expected an integer >= 1 or null"),
        ({"bem": 1},
         "methods.new.bem: no such option (did you mean 'beam'?); methods.new has budget, beam, temperature, "
         "mode, cap"),
    ]:
        with pytest.raises(GarenError) as refused:
            build(NewMethodConfig, values, "methods.new")
        assert str(refused.value) == f"invalid setting {message}"


def test_values_are_converted_as_yaml_gives_them():
    from garen_infer.index.grouping.groups import GroupParams

    params = build(GroupParams, {"resolution": 1, "max_group_size": 20.0}, "index.groups")
    assert params.resolution == 1.0 and isinstance(params.resolution, float)
    assert params.max_group_size == 20 and isinstance(params.max_group_size, int)


# ---- three defects once found, through the CLI ---------------------------------------------------------------------

def test_a_bad_value_is_one_line_not_a_traceback(tmp_path, capsys):
    """Was: ``TypeError: '<=' not supported between instances of 'int' and 'str'`` deep inside GAREN."""
    code = main(["run", "--dataset", str(tmp_path / "absent"), "--index", str(tmp_path / "absent-index"),
                 "--method", "garen",
                 "--set", "methods.garen.tau_switch=abc", "--out", str(tmp_path / "run")])
    assert code == 2
    line = one_error_line(capsys)
    # refused before the (absent) dataset is looked at
    assert line == "garen-infer run: error: invalid setting methods.garen.tau_switch='abc': expected an integer >= 0"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("budget", ["-5", "0", "ten"])
def test_a_budget_below_one_is_refused_before_the_run_starts(budget, tmp_path, capsys):
    """Was: -5 started the run and failed at the first window; 0 wrote an empty run and exited 0."""
    beir = write_beir(tmp_path / "beir")
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--dataset", str(beir), "--index", str(tmp_path / "index"), "--method", "rerank",
              "--budget", budget, "--out", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    assert f"argument --budget: expected an integer >= 1, got '{budget}'" in one_error_line(capsys)
    assert not (tmp_path / "run").exists()


def test_a_preset_budget_below_one_is_refused_too(tmp_path, capsys):
    code = main(["run", "--dataset", str(tmp_path / "absent"), "--index", str(tmp_path / "i"), "--method", "rerank",
                 "--set", "methods.rerank.budget=0", "--out", str(tmp_path / "run")])
    assert code == 2
    assert "invalid setting methods.rerank.budget=0: expected an integer >= 1" in one_error_line(capsys)


def test_index_settings_are_checked_before_the_corpus_loads(tmp_path, capsys):
    code = main(["index", "--dataset", str(tmp_path / "absent"), "--set", "index.knn_graph.k=0", "--out",
                 str(tmp_path / "i")])
    assert code == 2
    assert "invalid setting index.knn_graph.k=0: expected an integer >= 1" in one_error_line(capsys)
    assert not (tmp_path / "i").exists()


# ---- YAML aliases ---------------------------------------------------------------------------------------------
def _alias_bomb(levels: int) -> str:
    """Nested aliases: ``levels`` lines that stand for 9**levels strings ("billion laughs")."""
    lines = ['      l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"      l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * 9)}]" for k in range(1, levels)]
    return "models:\n  reranker:\n    backend: embedding\n    extra_body:\n" + "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    from garen_infer.configuration.presets import apply_override, read_yaml_mapping

    preset = tmp_path / "bomb.yaml"
    preset.write_text(_alias_bomb(9), encoding="utf-8")  # 387 million strings
    with pytest.raises(GarenError, match=r"bomb.yaml: not valid YAML \(its aliases expand to more than 100,000 values"):
        read_yaml_mapping(preset)
    with pytest.raises(GarenError, match="its aliases expand to more than 100,000 values"):
        apply_override({}, "models.reranker.extra_body=" + "{a: &a [x, x, x, x, x, x, x, x, x, x], " + ", ".join(
            f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]" for p, c in zip("abcde", "bcdef")) + "}")


def test_aliases_as_presets_use_them_are_read(tmp_path):
    from garen_infer.configuration.presets import read_yaml_mapping

    preset = tmp_path / "small.yaml"
    preset.write_text(_alias_bomb(4) + "methods:\n  rarg: &paper {budget: 3}\n  rarg+:\n    <<: *paper\n    "
                      "rounds: 2\n")
    mapping = read_yaml_mapping(preset)
    assert len(mapping["models"]["reranker"]["extra_body"]["l3"]) == 9 and mapping["methods"]["rarg+"] == {
        "budget": 3,
        "rounds": 2,
    }
