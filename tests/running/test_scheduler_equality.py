"""Every registered method gives the same rankings whether its queries run one at a time or many at once on
engines fed continuously: ``run.trec`` byte for byte, and ``trace.jsonl``'s records (rankings, the method's own
trace, the ledger's request and token counts). The models answer each item alone, as the oracle, the index's
embedder and a scripted agent do; one variant serves them as a server would, several requests in flight, each
answered after a delay drawn from its content, so answers come back in another order than they were asked."""

from __future__ import annotations

import hashlib
import shutil
import time

import pytest
from agent_scripts import ScriptedPolicy, answer, call, sequence
from test_shards import untimed_trace

from garen_infer.configuration.presets import load_preset, run_config_from
from garen_infer.llm.cache import NoCache
from garen_infer.llm.roles import Roles
from garen_infer.methods.base import METHODS
from garen_infer.running.runner import model_roles
from garen_infer.running.session import execute

ORACLE = {"reranker": {"backend": "oracle", "sigma": 0.3, "seed": 7},
          "navigator": {"backend": "oracle", "sigma": 0.3, "seed": 7}}
# REPAIR's planner writes text: the simulated one (the oracle's order) plays it beside either reranker
PLANNER = {"generator": {"backend": "oracle", "sigma": 0.3, "seed": 7}}
ORACLE = {**ORACLE, **PLANNER}
EMBEDDING = {"reranker": {"backend": "embedding"}, "navigator": {"backend": "embedding"}, **PLANNER}
ONE_AT_A_TIME = {"max_active_queries": 1, "max_batch": 1}
MANY_AT_ONCE = {"max_active_queries": 16, "max_batch": 64}
AGENT_METHODS = ("rarg", "rarg+", "rarg++")


class ServedBySlots:
    """The transport of a server in front of a role's model: ``requests_at_once`` requests in flight, each answered
    by the model alone after a delay drawn from the request (up to 20 ms), so answers overtake each other."""

    def __init__(self, role, slots: int = 4):
        self.role, self.name = role, getattr(role, "name", "served")
        self.backend = type("Server", (), {"requests_at_once": slots})()

    def __getattr__(self, method):
        answer_all = getattr(self.role, method)

        def answer_each(items):
            time.sleep(int(hashlib.sha256(repr(items).encode()).hexdigest()[:4], 16) / 65535 * 0.02)
            return answer_all(items)

        return answer_each


def agent_policy() -> ScriptedPolicy:
    return ScriptedPolicy(sequence(lambda q: call("embed_recall", scope_query=q),
                                   call("bash", command="rg -n -i -l a corpus"),
                                   final=answer("corpus/vol1.txt", "corpus/pho1.txt", "corpus/py3.txt")))


@pytest.fixture(scope="module")
def agent_full_index(full_index, tiny_dataset, tmp_path_factory):
    """Every cpu-default stage plus the corpus as files (the agent's)."""
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig

    path = tmp_path_factory.mktemp("equality-index") / "index"
    shutil.copytree(full_index.path, path)
    return IndexFolder.build(tiny_dataset, path, IndexConfig.from_dict({"corpus_files": {}}), log=lambda *_: None)


def run(dataset, index, method: str, models: dict, run_options: dict, out, served: bool = False):
    preset = load_preset("cpu-default")
    preset["models"] = models
    preset["run"] = run_options
    config = run_config_from(preset, method, 8)
    if method in AGENT_METHODS:
        roles = Roles(agent=agent_policy())
    else:
        roles = model_roles(config, dataset, index, NoCache())
    if served:
        roles = Roles(reranker=roles.reranker and ServedBySlots(roles.reranker),
                      scorers={name: ServedBySlots(scorer) for name, scorer in roles.scorers.items()},
                      generator=roles.generator and ServedBySlots(roles.generator),
                      agent=roles.agent and ServedBySlots(roles.agent))
    execute(dataset, index, config, out, roles=roles, cache=NoCache(), log=lambda *_: None)
    return out


@pytest.mark.parametrize("models", ["oracle", "embedding"])
@pytest.mark.parametrize("method", list(METHODS))
def test_many_queries_at_once_rank_as_one_at_a_time(method, models, tiny_dataset, agent_full_index, tmp_path):
    if method in AGENT_METHODS and models == "embedding":
        pytest.skip("the agent's model is the scripted policy, the same in both variants")
    spec = ORACLE if models == "oracle" else EMBEDDING
    alone = run(tiny_dataset, agent_full_index, method, spec, ONE_AT_A_TIME, tmp_path / "alone")
    for name, options, served in (("together", MANY_AT_ONCE, False), ("served", MANY_AT_ONCE, True)):
        together = run(tiny_dataset, agent_full_index, method, spec, options, tmp_path / name, served)
        assert (together / "run.trec").read_bytes() == (alone / "run.trec").read_bytes(), name
        assert untimed_trace(together) == untimed_trace(alone), name
