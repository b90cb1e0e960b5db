"""A score is the probability of *relevant*: P(yes) of a causal LM, checked on a model edited so that its two
logits are known, and a cross-encoder's P(relevant), checked against the classification head's own output for
one- and two-label heads. Not against other code: training and inference share the scoring code
(yes_no_scoring.py, cross_encoder.py), so comparing them with each other cannot catch a swap of the labels."""

from __future__ import annotations

import math

import pytest

from garen_infer.llm.backends.transformers_backend import TransformersBackend
from garen_infer.llm.prompts import QWEN3_ASSISTANT_PREFIX, yes_no

YES_MARGIN = 5.0  # the edited model's logit(yes) - logit(no) after this prompt:
YES_CHAT = yes_no("why do volcanoes erupt", "Magma rises through the crust and erupts as lava.")


@pytest.fixture(scope="module")
def model_that_says_yes(tiny_model_dir, tmp_path_factory):
    """The tiny model with its output row for "yes" set to the row for "no" plus 5 h / |h|^2, where h is the final
    hidden state after the test prompt: logit(yes) - logit(no) is then exactly 5 there, so P(yes) is known from
    the construction (sigmoid(5) = 0.9933), not from any code under test. The output layer is untied from the
    input embeddings first, so the prompt (which contains the word "yes") reads as before."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    net = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    text = tokenizer.apply_chat_template(YES_CHAT, tokenize=False, add_generation_prompt=True) + QWEN3_ASSISTANT_PREFIX
    ids = torch.tensor([tokenizer(text, add_special_tokens=False).input_ids])
    yes, no = (tokenizer(word, add_special_tokens=False).input_ids[0] for word in ("yes", "no"))
    with torch.no_grad():
        hidden = net.model(input_ids=ids).last_hidden_state[0, -1]
        head = net.lm_head.weight.detach().clone()
        head[yes] = head[no] + YES_MARGIN * hidden / hidden.dot(hidden)
        net.config.tie_word_embeddings = False
        net.lm_head.weight = torch.nn.Parameter(head)
        logits = net(input_ids=ids).logits[0, -1].double()
    assert float(logits[yes] - logits[no]) == pytest.approx(YES_MARGIN, abs=1e-4)  # the construction holds
    folder = tmp_path_factory.mktemp("says-yes")
    net.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_p_yes_is_the_probability_of_yes_not_of_no(model_that_says_yes):
    """Training and inference share the yes/no code, so a swap of the two labels would flip both and every
    comparison between them; this checks the score against the model's own two logits instead."""
    [scored] = TransformersBackend(model=str(model_that_says_yes), device="cpu").score_yes_no(
        [YES_CHAT], QWEN3_ASSISTANT_PREFIX
    )
    assert scored.score == pytest.approx(1 / (1 + math.exp(-YES_MARGIN)), abs=1e-4)  # 0.9933; swapped: 0.0067


def test_the_training_logit_is_the_log_odds_of_yes(model_that_says_yes):
    pytest.importorskip("peft")
    from garen_train.scorers.causal_lm import YesNoLoRAScorer

    module = YesNoLoRAScorer(str(model_that_says_yes), max_length=256, lora_dropout=0.0)  # a fresh adapter adds 0
    logit = module.relevance_logits(["why do volcanoes erupt"], ["Magma rises through the crust and erupts as lava."])
    assert float(logit[0].detach()) == pytest.approx(YES_MARGIN, abs=1e-4)


@pytest.mark.parametrize("labels, bias", [(1, [6.0]), (2, [-3.0, 3.0])], ids=["one-label", "two-label"])
def test_a_cross_encoders_score_is_its_heads_probability_of_relevant(labels, bias, tiny_bert_dir, tmp_path):
    """A one-label head: sigmoid of its logit; a two-label head ([irrelevant, relevant], the documented order):
    its softmax probability of label 1. The bias puts the answer far from 0.5, so a swap cannot pass. The pair is
    read as "[CLS] query [SEP] text [SEP]"."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from garen_infer.llm.backends.cross_encoder import CrossEncoderBackend

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    # the new head's weights are drawn at random: a fixed draw, and a bias far larger than their effect
    torch.manual_seed(0)
    net = AutoModelForSequenceClassification.from_pretrained(tiny_bert_dir, num_labels=labels,
                                                             dtype=torch.float32).eval()
    with torch.no_grad():
        net.classifier.bias.copy_(torch.tensor(bias))
    net.save_pretrained(tmp_path / "head")
    tokenizer.save_pretrained(tmp_path / "head")
    query, text = "why do volcanoes erupt", "Magma rises through the crust and erupts as lava."
    with torch.no_grad():
        logits = net(**tokenizer(query, text, return_tensors="pt")).logits[0].double()
    expected = float(torch.sigmoid(logits[0]) if labels == 1 else torch.softmax(logits, dim=0)[1])
    assert abs(expected - 0.5) > 0.4
    [scored] = CrossEncoderBackend(str(tmp_path / "head"), device="cpu").score_pairs([(query, text)])
    assert scored.score == pytest.approx(expected, abs=1e-5)
