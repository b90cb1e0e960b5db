"""The kinds of answer the ledger counts: each names one way a model's answer was not what we asked for, or one
thing the parser had to assume. Parsers add them to ``Completion.problems``; backends add ``retry:<cause>``
and ``context_refused``, and mark content
sent as parts (``extra["content_not_text"]``), which the ledger counts as ``content_not_text``."""

from __future__ import annotations

UNREADABLE = "unreadable"  # nothing usable was read: the caller fell back (first-stage order, no score, a retry)
IDS_MISSING = "ids_missing"  # a ranking without some of the ids it was shown
IDS_APPENDED = "ids_appended"  # ... whose missing ids were appended in input order (rank_llm's rule)
IDS_DUPLICATE = "ids_duplicate"  # an id ranked twice: its first place is kept
CUT_AT_MAX_TOKENS = "cut_at_max_tokens"  # the engine stopped the answer at max_tokens (finish_reason "length")
THOUGHT_WITHOUT_ANSWER = "thought_without_answer"  # a <think> that never closed, or nothing after it
TOOL_CALL_RECOVERED = "tool_call_recovered"  # a tool call read from the text the server returned as plain content
CONTENT_NOT_TEXT = "content_not_text"  # the server's content was a number, a list or null, not text
CONTEXT_REFUSED = "context_refused"  # the server refused an agent's chat as longer than the model's context
NOT_A_NUMBER = "not_a_number"  # a yes/no score that is NaN (never cached, never ranked on)
OTHER_MODEL = "other_model"  # the server says another model than the one asked for wrote the answer

# answers that gave nothing usable: their share per role is what the end of a run warns about
UNUSABLE = (UNREADABLE, THOUGHT_WITHOUT_ANSWER, NOT_A_NUMBER, CONTEXT_REFUSED)

# kinds that only a server's answer produces, never a model's text: tests/llm/test_openai_faults.py shows each one
SERVER_ONLY = (CONTEXT_REFUSED, OTHER_MODEL)
