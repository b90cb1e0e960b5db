"""A ``Session`` answers queries the same way in memory and into a run folder: ``search`` over the judged queries
gives the rankings ``run`` writes to ``run.trec``, for every method, the models loaded once for both."""

from __future__ import annotations

import pytest
from test_scheduler_equality import AGENT_METHODS, ORACLE

from garen_infer.configuration.presets import load_preset, run_config_from
from garen_infer.llm.cache import NoCache
from garen_infer.methods.base import METHODS
from garen_infer.running.session import Session
from garen_infer.storage.trec import read_run


@pytest.mark.parametrize("method", [m for m in METHODS if m not in AGENT_METHODS])
def test_search_ranks_as_run_writes(method, tiny_dataset, full_index, tmp_path):
    preset = load_preset("cpu-default")
    preset["models"] = ORACLE
    session = Session(tiny_dataset, full_index, run_config_from(preset, method, 8), NoCache(), log=lambda *_: None)
    found = session.search(tiny_dataset.judged_queries())
    roles = session.roles
    session.run(tmp_path / "run")
    assert session.roles is roles  # loaded once
    written = read_run(tmp_path / "run" / "run.trec")
    assert {qid: list(docs) for qid, docs in found.scored().items()} == {
        qid: list(docs) for qid, docs in written.items()
    }
    assert [(qid, docno) for qid, docno, _, _ in found.ranked_rows()] == [
        (q, d) for q, docs in written.items() for d in docs
    ]
