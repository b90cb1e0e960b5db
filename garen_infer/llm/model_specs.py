"""What a model spec may hold: a preset's ``models.<role>`` or an index stage's ``summarizer``.

A spec is the role's own keys (``prompt``, ``sampling``, ... ``roles.ROLE_KEYS``) plus the fields of its
backend's config class (``backends.BACKENDS``: a backend's settings are declared once, on its class). Anything
else is a typo and is refused with the nearest known key, before a model or the data loads. The same classes
say which fields only change how a model runs (``settings.execution_only``), so an index stage built by a
summarizer keeps its identity when only those change.
"""

from __future__ import annotations

import dataclasses

from garen_infer.errors import GarenError
from garen_infer.settings import did_you_mean, identity, refuse_unknown, validate

DEFAULT_BACKEND = "embedding"  # a role that names no backend is played by the index's embedding model
# roles played without a model backend: the index's embeddings, the simulation
BUILT_IN = (DEFAULT_BACKEND, "oracle")
SUMMARY_ONLY = ("extractive",)  # a stage's summarizer that calls no model
# what a role reads from its spec besides its backend's fields (llm/roles.py)
ROLE_KEYS = {"mode", "prompt", "max_words", "sampling", "instruction", "assistant_prefix", "prompt_text",
             "task", "price"}


def backend_of(spec: dict) -> str:
    """The backend a role's spec names, the default where it names none."""
    return spec.get("backend", DEFAULT_BACKEND)


def check_model_spec(spec, where: str, summarizer: bool = False) -> None:
    """One ``GarenError`` line for the first unknown key or bad value of ``spec`` (``where``: its place in the
    preset, e.g. ``models.reranker``). A stage's ``summarizer`` may be extractive and is that by default."""
    from garen_infer.llm.backends import BACKENDS, backend_class
    from garen_infer.llm.embedding_role import EmbeddingRole
    from garen_infer.llm.oracle import OracleSpec
    from garen_infer.llm.types import SamplingParams

    if spec is None:
        return
    default = SUMMARY_ONLY[0] if summarizer else DEFAULT_BACKEND
    if not isinstance(spec, dict):
        raise GarenError(f"invalid setting {where}={spec!r}: expected a mapping such as {{backend: {default}}}")
    kind = spec.get("backend", default)
    kinds = [*SUMMARY_ONLY, *BACKENDS] if summarizer else [*BACKENDS, *BUILT_IN]
    if kind not in kinds:
        raise GarenError(f"invalid setting {where}.backend={kind!r}: no such "
                         f"backend{did_you_mean(kind, kinds)}; known: {', '.join(kinds)}")
    if kind in SUMMARY_ONLY:
        refuse_unknown(spec, ["backend"], where)
    elif kind == "embedding":
        refuse_unknown(spec, _field_names(EmbeddingRole), where)  # model: the role's own, not the index's
    elif kind == "oracle":
        refuse_unknown(spec, ["backend", "mode", *_field_names(OracleSpec)], where)
    else:
        cls = backend_class(kind)
        fields = ["backend", *_field_names(cls)]
        refuse_unknown(spec, [*fields, *sorted(ROLE_KEYS)], where, prefer=fields)
        missing = [f.name for f in dataclasses.fields(cls) if f.init and _required(f) and f.name not in spec]
        if missing:
            raise GarenError(f"invalid setting {where}: backend '{kind}' needs {where}.{missing[0]}")
        validate(cls, {k: v for k, v in spec.items() if k != "backend" and k not in ROLE_KEYS}, where)
        if kind == "openai":  # before a key or a password reaches config.json
            from garen_infer.llm.backends.openai_requests import check_secrets

            check_secrets(spec, where)
        if kind == "vllm":  # before anything is written or loaded
            from garen_infer.llm.backends.vllm_limits import check_parallel

            check_parallel(spec.get("engine", "async"), spec.get("data_parallel_size", 1), where)
    if "sampling" in spec:
        validate(SamplingParams, spec["sampling"], f"{where}.sampling")


def spec_identity(spec: dict) -> dict:
    """The part of a model spec that changes what the model answers: the spec without its backend's
    execution-only fields (device, batch size, memory share, timeouts)."""
    from garen_infer.llm.backends import BACKENDS, backend_class

    kind = spec.get("backend")
    if kind not in BACKENDS:
        return spec
    return identity(backend_class(kind), spec)


# field metadata for a config field that holds a model spec: checked as one, identified as one
SUMMARIZER_SPEC = {"check": lambda spec, where: check_model_spec(spec, where, summarizer=True),
                   "identity": spec_identity}


def _field_names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
