"""parse_permutation: a listwise reranker's free text -> a permutation of the window (0-based), rank_llm style."""

import pytest

from garen_infer.llm.permutation import clean_response, parse_permutation, read_permutation
from garen_infer.llm.rgs_prompt import parse_all_or_identity


def is_permutation(order, n):
    return sorted(order) == list(range(n))


def test_plain_rankgpt_answer():
    assert parse_permutation("[2] > [3] > [1]", 3) == [1, 2, 0]


def test_multi_digit_ids():
    assert parse_permutation("[12] > [10] > [2]", 12) == [11, 9, 1, 0, 2, 3, 4, 5, 6, 7, 8, 10]


def test_text_before_the_last_think_close_is_dropped():
    # Qwen3 / ReasonRank reasoning: numbers inside the thought must not count
    text = "<think>Passage [1] mentions lava but [3] is off topic; 2 of them are close.</think>\n[3] > [1] > [2]"
    assert parse_permutation(text, 3) == [2, 0, 1]


def test_only_the_last_think_block_counts():
    text = "<think>[1] > [2]</think> draft [2] > [1] <think>again</think> [4] > [3]"
    assert parse_permutation(text, 4) == [3, 2, 0, 1]


def test_answer_block_wins_over_surrounding_text():
    text = "I compared 5 passages.\n<answer> [3] > [1] > [2] </answer>\nHope [2] helps."
    assert parse_permutation(text, 3) == [2, 0, 1]


def test_last_answer_block_is_used_after_think():
    text = "<think>maybe <answer>[1] > [2]</answer></think><answer>[2] > [1]</answer>"
    assert parse_permutation(text, 2) == [1, 0]


def test_garen_reasoning_format():
    text = (
        "[Reasoning Trace] Step 1: The query asks about 2 processes. Step 2: Passage [4] explains magma. "
        "Step 3: compare.\n[Document Ranking] [3] > [1] > [4]"
    )
    # step numbers and ids cited in the trace are ignored; the forgotten [2] is appended
    assert parse_permutation(text, 4) == [2, 0, 3, 1]


def test_duplicates_keep_first_occurrence():
    assert parse_permutation("[2] > [2] > [1] > [2] > [3] > [1]", 3) == [1, 0, 2]


def test_out_of_range_ids_are_dropped():
    assert parse_permutation("[0] > [7] > [2] > [99] > [1]", 3) == [1, 0, 2]


def test_missing_ids_appended_in_input_order():
    assert parse_permutation("[4] > [2]", 6) == [3, 1, 0, 2, 4, 5]


@pytest.mark.parametrize(
    "text",
    [
        "［３］ > ［１］ > ［２］",  # full-width digits and brackets
        "[³] > [¹] > [²]",  # superscripts
        "③ > ① > ②",  # circled digits
    ],
    ids=["fullwidth", "superscript", "circled"],
)
def test_fancy_digits_become_ascii(text):
    assert parse_permutation(text, 3) == [2, 0, 1]


def test_clean_response_maps_fancy_digits():
    assert clean_response("［１２］ ⁵ ④") == "［12］ 5 4"


@pytest.mark.parametrize("text", ["I cannot rank these passages.", "", "   \n", "</think>",
                                  "<answer></answer>", "[] > []"])
def test_no_usable_id_gives_identity(text):
    assert parse_permutation(text, 4) == [0, 1, 2, 3]


def test_empty_window():
    assert parse_permutation("[1] > [2]", 0) == []


@pytest.mark.parametrize(
    "text",
    [
        "[5] > [5] > [0] > [-3] > [2]",
        "<think>[1]</think><answer>[9] > [3]</answer>",
        "Ranking: 3, 3, 1; then 4 and 10 and ²",
        "[Document Ranking] [2] [Document Ranking] [5] > [1]",
        "12345678901234567890",  # one huge number, far out of range
    ],
)
def test_always_a_permutation(text):
    assert is_permutation(parse_permutation(text, 5), 5)


def test_reasoning_cut_off_before_its_ranking_gives_the_identity():
    cut = "[Reasoning Trace] Step 1: identify the 2 mechanisms. Step 2: documents [14] and [3] describe"
    assert parse_permutation(cut, 20) == list(range(20))


# ---- what real models write, and what each answer is counted as ------------------------------------------------


@pytest.mark.parametrize("header", ["**Document Ranking:**", "## Document Ranking", "### Document Ranking:",
                                    "Document Ranking:"])
def test_markdown_ranking_headers_are_read_like_garens_own(header):
    text = (
        "**Reasoning Trace:** Step 1: the query needs 2 facts. Step 2: passage [4] has "
        f"one.\n{header}\n[3] > [1] > [4] > [2]"
    )
    assert read_permutation(text, 4).order == [2, 0, 3, 1]
    assert read_permutation(text, 4).problems == []


def test_a_markdown_trace_cut_before_its_ranking_is_unreadable():
    parsed = read_permutation("## Reasoning Trace\nStep 1: documents [14] and [3] describe", 20)
    assert (parsed.order, parsed.problems) == (list(range(20)), ["unreadable"])


@pytest.mark.parametrize("text", ["<think>Passage [3] beats [1] because", "<think>[2] > [1]</think>\n  "])
def test_a_thought_without_an_answer_is_never_read_for_ids(text):
    parsed = read_permutation(text, 3)
    assert (parsed.order, parsed.problems) == ([0, 1, 2], ["thought_without_answer"])


def test_refusal_is_counted_unreadable():
    parsed = read_permutation("I'm sorry, but I can't help with ranking these documents.", 5)
    assert (parsed.order, parsed.problems) == ([0, 1, 2, 3, 4], ["unreadable"])


def test_missing_and_duplicate_ids_are_named():
    parsed = read_permutation("[2] > [2] > [4]", 4)
    assert parsed.order == [1, 3, 0, 2]
    assert parsed.problems == ["ids_duplicate", "ids_missing", "ids_appended"]
    assert read_permutation("[2] > [1]", 2).problems == []


@pytest.mark.parametrize("content", [3, [3, 1, 2], [{"type": "text", "text": "[3] > [1] > [2]"}]])
def test_a_number_or_a_list_as_content_is_read_and_counted(content):
    parsed = read_permutation(content, 3)
    assert parsed.problems[0] == "content_not_text"
    assert parsed.order[0] == 2


def test_rgs_rule_keeps_input_order_and_says_why():
    assert parse_all_or_identity("[3] > [1]", 3).problems == ["ids_missing", "unreadable"]
    assert parse_all_or_identity("I cannot rank these.", 3).problems == ["unreadable"]
    assert parse_all_or_identity("<think>[1] [2] [3]", 3).problems == ["thought_without_answer"]
    assert parse_all_or_identity("<think>[3] [2] [1]</think>[2] > [3] > [1]", 3).order == [1, 2, 0]
