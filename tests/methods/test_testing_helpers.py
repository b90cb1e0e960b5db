"""The public testing helpers catch what they are for: ``drive`` with a ledger refuses a budget overrun as a
run would, and ``check_method_contract`` fails a method that returns an excluded id or ranks differently when
run again."""

from __future__ import annotations

import itertools

import pytest

from garen_infer.configuration.run_config import RunConfig
from garen_infer.data.dataset import Query
from garen_infer.llm.ledger import BudgetExceeded, QueryLedger
from garen_infer.llm.requests import Rerank
from garen_infer.methods.base import METHODS, QueryState
from garen_infer.methods.bm25 import Bm25Method
from garen_infer.testing.methods import check_method_contract, drive, scripted_answers

RUNS = itertools.count()


class ReturnsExcluded(Bm25Method):
    name = "returns-excluded"

    def search(self, state: QueryState):
        excluded = [self.dataset.doc_index[d] for d in state.query.excluded_ids]
        return [*state.first_stage, *excluded]
        yield


class ChangesEachRun(Bm25Method):
    name = "changes-each-run"

    def __init__(self, config, index, dataset):
        super().__init__(config, index, dataset)
        self.reverse = next(RUNS) % 2 == 1  # every other run reverses its rankings

    def search(self, state: QueryState):
        return state.first_stage[::-1] if self.reverse else state.first_stage
        yield


RETURNS_EXCLUDED, CHANGES_EACH_RUN = ReturnsExcluded, ChangesEachRun


def overspending(state: QueryState):
    yield Rerank((0, 1, 2))
    yield Rerank((3, 4))
    return [0, 1, 2, 3, 4]


def test_drive_answers_by_hand_and_refuses_an_overrun():
    state = QueryState(Query("q", "query"), [0, 1, 2, 3, 4], 5)
    ranking, requests = drive(overspending(state), scripted_answers({4: 1.0}), QueryLedger(5))
    assert ranking == [0, 1, 2, 3, 4] and [r.rows for r in requests] == [(0, 1, 2), (3, 4)]
    with pytest.raises(BudgetExceeded):
        drive(overspending(state), scripted_answers({}), QueryLedger(4))


@pytest.mark.parametrize("name, broken", [("returns-excluded", "excluded ids returned"),
                                          ("changes-each-run", "another run.trec")])
def test_the_contract_fails_a_method_that_breaks_it(name, broken, tiny_dataset, tiny_index, tmp_path,
                                                    monkeypatch):
    from dataclasses import replace

    from garen_infer.data.dataset import Dataset

    monkeypatch.setitem(METHODS, name, f"test_testing_helpers:{name.upper().replace('-', '_')}")
    first_document = frozenset({tiny_dataset.documents[0].id})
    queries = [replace(q, excluded_ids=first_document) for q in tiny_dataset.queries]
    dataset = Dataset(tiny_dataset.name, tiny_dataset.documents, queries, tiny_dataset.qrels)
    with pytest.raises(AssertionError, match=broken):
        check_method_contract(dataset, tiny_index, RunConfig.build(name), tmp_path)
    check_method_contract(dataset, tiny_index, RunConfig.build("bm25"), tmp_path / "bm25")  # what it bends
