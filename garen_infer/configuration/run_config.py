"""A run's configuration: one typed object, built once, whichever door asked (CLI, Python API, PyTerrier,
bench, demo, mining) and read by the runner as it is.

``RunConfig.build`` checks each part against its declaration (``settings.py``) and raises one ``GarenError``
line naming the key: the method's own config (its paper defaults, the preset's options, the budget written in
once), the first stage, the model spec of each role, and the run section's fields below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Annotated, Any

from garen_infer.errors import GarenError
from garen_infer.index.first_stage import REWRITE, FirstStageConfig
from garen_infer.settings import Count, Range, build, refuse_unknown, validate


@dataclass
class RunConfig:
    method: str  # a registered method's name (methods/base.py: METHODS)
    options: Any  # the method's own Config dataclass, checked, with the budget in it where it takes one
    first_stage: FirstStageConfig = field(default_factory=FirstStageConfig)
    models: dict[str, dict] = field(default_factory=dict)  # role -> model spec, checked (llm/model_specs.py)
    max_active_queries: Count = 16  # queries in flight at once; 1 = strictly one at a time
    max_batch: Count = 64  # items per backend call
    limit: Count | None = None  # first N judged queries only (smoke runs)
    shard: str | None = None  # "i/n": only shard i of n of those queries (shards.py), from --shard
    # a role whose share of unusable answers (unreadable, a thought without an answer, NaN) is above this is
    # named loudly at the end of the run: its numbers rest on fallbacks, not on the model
    unusable_answers_warning: Annotated[float, Range(0.0, 1.0)] = 0.05

    @classmethod
    def build(cls, method: str, method_options: Mapping | None = None, budget: int | None = None,
              first_stage: Mapping | None = None, models: Mapping | None = None, **run) -> RunConfig:
        """The configuration of a run of ``method``: ``method_options`` as a preset's ``methods.<name>``
        holds them, ``budget`` (``--budget``) over the preset's, ``first_stage`` and ``models`` as their
        preset sections hold them, and ``run`` the run section's fields (``max_active_queries``, ...)."""
        from garen_infer.llm.model_specs import check_model_spec
        from garen_infer.methods.base import get_method, make_config

        method_cls = get_method(method)
        options = dict(method_options or {})
        if budget is not None and takes_budget(method_cls):
            options["budget"] = budget  # the one place --budget overrides the preset's
        models = dict(models or {})
        for role, spec in models.items():
            check_model_spec(spec, f"models.{role}")
        refuse_unknown(run, RUN_SECTION, "run")
        first = build(FirstStageConfig, dict(first_stage or {}), "first_stage")
        checked_run = validate(cls, run, "run", partial=True)
        return cls(method, make_config(method_cls, options), first, models, **checked_run)

    @property
    def method_class(self):
        from garen_infer.methods.base import get_method

        return get_method(self.method)

    @property
    def budget(self) -> int | None:
        """Distinct documents the method may show its reranker (Reranker@k); None for a method without."""
        return self.options.budget if takes_budget(self.method_class) else None

    def settled_options(self):
        """The method's options with what follows from the models filled in (GAREN's RBP p from the reranker
        prompt): what a run uses and records."""
        return self.method_class.settle(self.options, self.models)

    @property
    def index_stages(self) -> tuple[str, ...]:
        """Every index stage the run reads, first stage first, known without building the method."""
        stages = (self.first_stage.index_stage, *self.method_class.stages_for(self.options))
        return tuple(dict.fromkeys(stages))

    @property
    def roles(self) -> tuple[str, ...]:
        """The model roles the run uses, known without building the method."""
        roles = tuple(self.method_class.roles_for(self.settled_options()))
        if self.first_stage.query == REWRITE:  # the generator writes each query's first-stage text
            roles = (*roles, "generator")
        return tuple(dict.fromkeys(roles))

    def missing_roles(self) -> list[str]:
        return [role for role in self.roles if role not in self.models]

    def require_models(self) -> None:
        missing = self.missing_roles()
        if missing:
            needs = ", ".join(missing)
            rewrites = "generator" in missing and self.first_stage.query == REWRITE
            why = " (first_stage.query: rewrite asks it for each query's text)" if rewrites else ""
            where = "add them under 'models:' in the preset"
            raise GarenError(f"method '{self.method}' needs model(s) for {needs}{why}; {where}")


# a preset's run: section; the other fields come from the command line and other sections of the preset
RUN_SECTION = tuple(f.name for f in fields(RunConfig))[4:]


def takes_budget(method_cls) -> bool:
    return "budget" in {f.name for f in fields(method_cls.Config)}
