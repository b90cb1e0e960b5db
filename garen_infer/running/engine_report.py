"""What each role's engine started with, recorded in a run's ``config.json`` and ``metrics.json`` under
``engines``, and one warning per role whose requests in flight do not match its engine (vllm_limits.py)."""

from __future__ import annotations

from garen_infer.configuration.run_config import RunConfig
from garen_infer.llm.backends.vllm_limits import in_flight_warning

ONE_PER_QUERY = ("reranker", "generator", "agent")  # one window, plan or turn of each query at a time


def role_models(roles) -> dict[str, object]:
    models = {"reranker": roles.reranker, "generator": roles.generator, "agent": roles.agent, **roles.scorers}
    return {role: model for role, model in models.items() if model is not None}


def engine_of(model):
    """The backend behind a role, through the response cache's wrapper; None for a role without one."""
    inner = getattr(model, "backend", None)
    return getattr(inner, "backend", inner)


def engine_records(roles, config: RunConfig, log) -> dict[str, dict]:
    """{role: the limits its engine started with} for every role on a vLLM engine, each mismatch logged once. A
    query keeps one request of a reranker, generator or agent in flight, up to ``max_batch`` of a scorer."""
    records = {}
    for role, model in role_models(roles).items():
        limits = getattr(engine_of(model), "limits", None)
        if limits is None:
            continue
        records[role] = limits.as_record()
        per_query = 1 if role in ONE_PER_QUERY else config.max_batch
        warning = in_flight_warning(role, config.max_active_queries * per_query, limits)
        if warning:
            log(warning)
    return records
