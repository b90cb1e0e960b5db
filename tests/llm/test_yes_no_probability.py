"""P(yes) from a yes/no answer, as every backend reads it: from two listed logprobs (vLLM, OpenAI-compatible
servers) and from a batch of [no, yes] logits (transformers, training), with a missing label ranked below every
listed token."""

from __future__ import annotations

import math

import pytest

from garen_infer.llm.backends.yes_no_scoring import (
    MISSING_LOGPROB,
    unlisted_logprob,
    yes_log_odds,
    yes_probabilities,
    yes_probability,
)


def test_p_yes_is_normalised_over_the_two_labels():
    assert yes_probability(math.log(0.6), math.log(0.3)) == pytest.approx(2 / 3, abs=1e-15)
    assert yes_probability(-2.0, -2.0) == 0.5
    # far below zero, where exp() of either alone is 0.0: still sigmoid of the difference
    assert yes_probability(-1000.0, -1001.0) == pytest.approx(1 / (1 + math.exp(-1)), abs=1e-15)


def test_a_missing_label_ranks_below_every_listed_token():
    assert unlisted_logprob([-0.1, -3.0]) == MISSING_LOGPROB
    assert unlisted_logprob([-0.1, -14.0]) == -14.0


def test_logits_and_logprobs_give_one_p_yes():
    torch = pytest.importorskip("torch")
    pairs = [(-1.5, 2.0), (3.0, -0.25), (0.0, 0.0)]  # (no, yes)
    logits = torch.tensor(pairs)
    from_logits = yes_probabilities(logits).tolist()
    from_logprobs = [yes_probability(yes, no) for no, yes in pairs]  # log-softmax only shifts both logits
    assert from_logits == pytest.approx(from_logprobs, abs=1e-7)
    assert torch.sigmoid(yes_log_odds(logits)).tolist() == pytest.approx(from_logits, abs=1e-7)
