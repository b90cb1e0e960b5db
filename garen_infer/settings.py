"""Settings checked before anything loads: each preset or ``--set`` value against its config field's declaration.

Every config is a dataclass, and its type hints are the rules: ``int``, ``float``, ``bool``, ``str``, ``dict``,
``list[...]``, ``X | None``, ``Literal["a", "b"]`` (the allowed choices) and nested dataclasses. A range sits next
to the field in the hint, ``Annotated[int, AtLeast(1)]``, or through the aliases below:

    budget: Count = 100                                   # an integer >= 1
    keep: Annotated[int, AtLeast(0), Below("window")] = 10  # a bound may name another field
    rbp_p: Probability = 0.6                              # a number in [0, 1]
    strategy: Literal["explore-then-exploit", "explore", "exploit"] = "explore-then-exploit"

``build(Config, values, "methods.garen")`` returns the config or raises one ``GarenError`` line naming the key,
the value and what is allowed (an unknown key with the nearest known one: "did you mean"); a config added later
needs no code here to be checked. A field's metadata may add its own ``check`` (a model spec is checked against
its backend's fields, ``llm/model_specs.py``).

A stage's identity is made of the settings that change its result. ``execution_only`` marks the others (the
device, a batch size, a chunk size): ``identity`` leaves them out, so changing them never rebuilds a stage.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal, Union

from garen_infer.errors import GarenError

Bound = int | float | str | None  # a number, or the name of another field of the same config


@dataclass(frozen=True)
class Range:
    """``low <= value <= high``; a bound that is a string names another field; ``open`` bounds are strict."""

    low: Bound = None
    high: Bound = None
    low_open: bool = False
    high_open: bool = False

    def describe(self, resolve=lambda b: b) -> str:
        if isinstance(self.low, (int, float)) and isinstance(self.high, (int, float)):
            return f"in {'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {_bound_text(self.low, resolve)}")
        if self.high is not None:
            parts.append(f"{'<' if self.high_open else '<='} {_bound_text(self.high, resolve)}")
        return " and ".join(parts)

    def admits(self, value, resolve) -> bool:
        low, high = resolve(self.low), resolve(self.high)
        if low is not None and (value < low or (self.low_open and value == low)):
            return False
        return not (high is not None and (value > high or (self.high_open and value == high)))


def AtLeast(low: Bound) -> Range:  # reads as a declaration next to the field
    return Range(low=low)


def Above(low: Bound) -> Range:
    return Range(low=low, low_open=True)


def AtMost(high: Bound) -> Range:
    return Range(high=high)


def Below(high: Bound) -> Range:
    return Range(high=high, high_open=True)


def Between(low: Bound, high: Bound) -> Range:
    return Range(low=low, high=high)


Count = Annotated[int, AtLeast(1)]  # budgets, sizes, depths: at least one
NonNegative = Annotated[int, AtLeast(0)]
Positive = Annotated[float, Above(0)]
NonNegativeFloat = Annotated[float, AtLeast(0)]
Probability = Annotated[float, Between(0.0, 1.0)]


def _bound_text(bound: Bound, resolve) -> str:
    if isinstance(bound, str):
        value = resolve(bound)
        return bound if value is None else f"{bound} ({value!r})"
    return repr(bound)


EXECUTION_ONLY = "execution_only"  # field metadata: how a result is computed, not what it is


def execution_only(default):
    """A field whose value never changes the result (where it runs, how much at once): not part of a stage's
    identity."""
    return field(default=default, metadata={EXECUTION_ONLY: True})


def identity(cls, values: dict) -> dict:
    """``values`` (a config's fields, as recorded) without the execution-only fields of ``cls``; a field whose
    metadata has an ``identity`` function (a model spec) is reduced by it."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out = {}
    for name, value in values.items():
        metadata = fields[name].metadata if name in fields else {}
        if not metadata.get(EXECUTION_ONLY):
            out[name] = metadata["identity"](value) if "identity" in metadata and isinstance(value, dict) else value
    return out


def did_you_mean(key, known, prefer=()) -> str:
    """`` (did you mean 'x'?)`` for the known name nearest a typo (looked for among ``prefer`` first), or ''."""
    near = difflib.get_close_matches(str(key), list(prefer), n=1) or difflib.get_close_matches(
        str(key), [str(k) for k in known], n=1
    )
    return f" (did you mean '{near[0]}'?)" if near else ""


def refuse_unknown(given, known, where: str, what: str = "option", prefer=()) -> None:
    """One line for the first key of ``given`` that is not in ``known``, with the nearest known key as a hint."""
    unknown = sorted(set(given) - set(known), key=str)
    if unknown:
        key = str(unknown[0])
        hint = did_you_mean(key, known, prefer)
        place = f"{where}.{key}" if where else key
        has = f"{where} has" if where and what == "option" else "known:"
        raise GarenError(f"invalid setting {place}: no such {what}{hint}; {has} {', '.join(map(str, known))}")


# ---- checking ------------------------------------------------------------------------------------------------------
class _Refused(Exception):
    def __init__(self, allowed: str):
        super().__init__(allowed)
        self.allowed = allowed


@cache
def hints(cls) -> dict[str, Any]:
    """The resolved type hints of a config dataclass, ``Annotated`` extras kept."""
    return typing.get_type_hints(cls, include_extras=True)


def validate(cls, values, where: str, partial: bool = False) -> dict:
    """Check ``values`` (a mapping from YAML) against ``cls``'s fields and return them converted (ints become
    floats for float fields, lists become tuples for tuple fields). Unknown keys are refused. With ``partial``,
    only the given keys are checked (a section that sets some fields of a larger config)."""
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise GarenError(f"invalid setting {where}={values!r}: expected a mapping of options")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    refuse_unknown(values, fields, where)
    field_hints = hints(cls)
    converted = {}
    for name, value in values.items():
        try:
            converted[name] = _convert(field_hints[name], value, f"{where}.{name}")
        except _Refused as refused:
            raise GarenError(f"invalid setting {where}.{name}={value!r}: expected {refused.allowed}") from None
        if "check" in fields[name].metadata:
            fields[name].metadata["check"](converted[name], f"{where}.{name}")
    resolved = {**_defaults(fields), **converted}
    for name in (converted if partial else fields):
        value = resolved.get(name)
        for rule in _ranges(field_hints[name]):
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and not rule.admits(value, lambda b: _resolve(b, resolved))
            ):
                kind = "an integer" if isinstance(value, int) else "a number"
                allowed = f"{kind} {rule.describe(lambda b: _resolve(b, resolved))}"
                raise GarenError(f"invalid setting {where}.{name}={value!r}: expected {allowed}")
    return converted


def build(cls, values, where: str):
    """``cls(**values)`` after ``validate``: the config, or one line naming what is wrong."""
    converted = validate(cls, values, where)
    try:
        return cls(**converted)
    except (TypeError, ValueError) as err:  # a __post_init__ check of the config itself
        raise GarenError(f"invalid setting {where}: {err}") from None


def describe(hint) -> str:
    """What a field allows, in words (``an integer >= 1``, ``one of 'a', 'b'``, ``an integer >= 1 or null``)."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        return " or ".join(describe(arm) for arm in typing.get_args(hint))
    rules = " and ".join(r.describe() for r in _ranges(hint))
    return f"{_kind(hint)} {rules}".strip()


def _defaults(fields) -> dict:
    out = {}
    for name, f in fields.items():
        if f.default is not dataclasses.MISSING:
            out[name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[name] = f.default_factory()
    return out


def _resolve(bound: Bound, values: dict):
    if isinstance(bound, str):
        value = values.get(bound)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return bound


def _ranges(hint) -> list[Range]:
    rules = []
    if typing.get_origin(hint) is Annotated:
        rules = [m for m in hint.__metadata__ if isinstance(m, Range)]
        hint = typing.get_args(hint)[0]
    for arm in _union_arms(hint):  # Count | None: the arm's ranges apply when a number is given
        if arm is not hint:
            rules += _ranges(arm)
    return rules


def _union_arms(hint) -> tuple:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _kind(hint) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return _kind(args[0])
    if origin in (Union, types.UnionType):
        return " or ".join(_kind(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if hint is type(None):
        return "null"
    if hint is bool:
        return "true or false"
    if hint is int:
        return "an integer"
    if hint is float:
        return "a number"
    if hint is str:
        return "a string"
    if hint is dict or origin is dict:
        return "a mapping"
    if hint in (list, tuple) or origin in (list, tuple):
        return "a list"
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return f"a mapping of {hint.__name__} options"
    return "any value"


def _convert(hint, value, where: str):
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        try:
            return _convert(args[0], value, where)
        except _Refused:
            raise _Refused(describe(hint)) from None
    if origin in (Union, types.UnionType):
        return _convert_union(hint, args, value, where)
    if origin is Literal:
        if value in args and not (isinstance(value, bool) and not any(a is value for a in args)):
            return value
        raise _Refused(_kind(hint))
    if hint in _SCALARS:
        return _SCALARS[hint](hint, value)
    if hint is dict or origin is dict:
        if isinstance(value, dict):
            return value
        raise _Refused(describe(hint))
    if hint in (list, tuple) or origin in (list, tuple):
        return _convert_sequence(hint, origin, args, value, where)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return value if isinstance(value, hint) else build(hint, value, where)
    return value  # Any, object or a type this checker does not know: the config takes it as is


def _convert_union(hint, arms, value, where: str):
    if value is None and type(None) in arms:
        return None
    for arm in arms:
        if arm is type(None):
            continue
        try:
            return _convert(arm, value, where)
        except _Refused:
            continue
    raise _Refused(describe(hint))


def _convert_sequence(hint, origin, args, value, where: str):
    if not isinstance(value, (list, tuple)):
        raise _Refused(describe(hint))
    item = args[0] if args and (origin is list or (len(args) == 2 and args[1] is Ellipsis)) else Any
    items = [_convert(item, v, where) for v in value]
    return tuple(items) if (hint is tuple or origin is tuple) else items


def _to_bool(hint, value):
    if isinstance(value, bool):
        return value
    raise _Refused(describe(hint))


def _to_int(hint, value):
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _Refused(describe(hint))


def _to_float(hint, value):
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
        return float(value)
    raise _Refused(describe(hint))


def _to_str(hint, value):
    if isinstance(value, str):
        return value
    raise _Refused(describe(hint))


_SCALARS = {bool: _to_bool, int: _to_int, float: _to_float, str: _to_str}
