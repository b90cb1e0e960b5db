"""Dollars per query (Table 7), Hit@100 by hop distance (Fig. 4/8), averaging over seeds."""

from __future__ import annotations

import json

import pytest

from garen_infer.evaluation.costs import TABLE7_PRICES, TokenPrices, mean_cost, prices_for, query_cost
from garen_infer.evaluation.reachability import hit_by_hops, reach
from garen_infer.running.repeat import run_seeds, with_seed

RERANKER, NAVIGATOR = "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8", "Qwen/Qwen3-Reranker-4B"


@pytest.mark.parametrize("model, tokens_in, tokens_out, dollars", [
    (RERANKER, 48_938, 4_523, 0.0094), (RERANKER, 45_880, 4_524, 0.0091),  # Table 7, GAREN (BM25) / (ReasonIR)
    (RERANKER, 85_419, 13_859, 0.0229),  # Table 7, LATTICE's traversal on the same model
    (NAVIGATOR, 76_093, 160, 0.0015), (NAVIGATOR, 76_114, 160, 0.0015),
])
def test_table7_prices_reproduce_its_costs(model, tokens_in, tokens_out, dollars):
    assert round(TABLE7_PRICES[model].dollars(tokens_in, tokens_out), 4) == dollars


def test_costs_per_role_and_per_run():
    models = {"reranker": {"backend": "vllm", "model": RERANKER}, "navigator": {"backend": "embedding"},
              "judge": {"backend": "openai", "model": "x",
                        "price": {"input_per_million": 1.0, "output_per_million": 2.0}}}
    prices = prices_for(models)
    assert set(prices) == {"reranker", "judge"} and prices["judge"] == TokenPrices(1.0, 2.0)
    ledger = {"roles": {"reranker": {"input_tokens": 1_000_000, "output_tokens": 100_000},
                        "judge": {"input_tokens": 10, "output_tokens": 5}}}
    cost = query_cost(ledger, prices)
    assert (
        cost["reranker"] == pytest.approx(0.2)
        and cost["judge"] == pytest.approx(2e-5)
        and cost["total"] == pytest.approx(0.20002)
    )
    assert mean_cost([ledger, {"roles": {}}], prices)["mean_cost_usd_total"] == pytest.approx(0.10001)
    assert mean_cost([ledger], {}) == {}
    with pytest.raises(Exception, match="input_per_million"):
        prices_for({"r": {"price": {"input": 1}}})


class Chain:
    """0 - 1 - 2 - ... - 29: a path, so hop distances are positions."""

    def of(self, row):
        return [r for r in (row - 1, row + 1) if 0 <= r < 30]


def test_hit_at_100_by_hop_distance():
    first_stage = list(range(20))  # the top 20 are rows 0..19
    assert reach(Chain(), first_stage, {5}, [5]) is None  # gold inside the top 20: not counted (sec. 6.3)
    far = reach(Chain(), first_stage, {22}, ranking=[0, 22])
    missed = reach(Chain(), first_stage, {21}, ranking=list(range(20)))
    assert far == {"min_hops": 3, "hit@100": True} and missed == {"min_hops": 2, "hit@100": False}
    assert hit_by_hops([far, missed, None, {"min_hops": 3, "hit@100": False},
                        {"min_hops": None, "hit@100": False}]) == {
        "2": {"queries": 1, "hit@100": 0.0}, "3": {"queries": 2, "hit@100": 0.5},
        "none": {"queries": 1, "hit@100": 0.0}}


def test_a_run_reports_cost_and_reachability(tiny_dataset, tiny_index, tmp_path):
    from garen_infer.llm.roles import Roles
    from garen_infer.llm.types import Completion
    from garen_infer.running.runner import RunConfig
    from garen_infer.running.session import execute

    class PricedReranker:
        def rerank(self, jobs):
            return [(list(job.rows), Completion(input_tokens=1000, output_tokens=100)) for job in jobs]

    config = RunConfig.build(method="rerank", budget=4, first_stage={"kind": "bm25", "depth": 3},
                       models={"reranker": {"backend": "vllm", "model": RERANKER}})
    metrics = execute(tiny_dataset, tiny_index, config, tmp_path / "run",
                      roles=Roles(reranker=PricedReranker()), log=lambda *_: None)
    calls = metrics["mean_requests"]
    assert metrics["mean_cost_usd_reranker"] == pytest.approx(calls * (1000 * 0.09 + 100 * 1.10) / 1e6)
    records = [json.loads(line) for line in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    assert all("reach" in r for r in records)  # the tiny index has a k-NN graph: every judged query is checked


def test_seeds_are_averaged():
    models = {"reranker": {"backend": "vllm", "model": RERANKER, "sampling": {"temperature": 0.0}},
              "navigator": {"backend": "embedding"}}
    seeded = with_seed(models, 3)
    assert seeded["reranker"]["sampling"] == {"temperature": 0.0, "seed": 3} and "sampling" not in seeded["navigator"]
    assert "seed" not in models["reranker"]["sampling"]  # the preset is not changed
    from garen_infer.running.runner import RunConfig

    seen = []

    def fake_run(dataset, index, config, out, **kwargs):
        seen.append((config.models["reranker"]["sampling"]["seed"], out.name))
        return {"dataset": "d", "method": "m", "nDCG@10": 0.5 + 0.1 * len(seen), "queries": 3,
                "hit@100_by_min_hops": {}}

    import tempfile

    out = tempfile.mkdtemp()
    summary = run_seeds(None, None, RunConfig.build(method="rerank", models=models), out, 3, run=fake_run)
    assert seen == [(0, "seed-0"), (1, "seed-1"), (2, "seed-2")]
    assert summary["mean"]["nDCG@10"] == pytest.approx(0.7) and summary["runs"] == 3 and summary["std"]["queries"] == 0
