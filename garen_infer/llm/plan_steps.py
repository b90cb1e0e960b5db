"""Reading the plan out of a planning reranker's answer (REPAIR's step reranker; GAREN App. G's reasoning prompt).

The answer has two sections, ``[Reasoning Trace]`` with ``Step n: ...`` lines and then ``[Document Ranking]``
with ``[i] > [j] > ...``. The steps are the lines of the trace section that start with ``Step <n>:`` (the REPAIR
authors' code reads them the same way); the ranking is read by ``permutation.parse_permutation``. What could not
be read is said, so the method counts it instead of acting on a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TRACE, RANKING = "[Reasoning Trace]", "[Document Ranking]"
_STEP = re.compile(r"Step \d+:\s*(.+)")


@dataclass(frozen=True)
class PlannedAnswer:
    steps: tuple[str, ...]  # the plan, in the model's order; empty when no step line could be read
    has_ranking: bool  # False: no ranking section, so the permutation parser falls back to the window's order


def read_plan(text: str) -> PlannedAnswer:
    if "</think>" in text:  # a thinking model's scratchpad is not its plan
        text = text.rsplit("</think>", 1)[1]
    trace = text.rsplit(TRACE, 1)[1] if TRACE in text else text
    trace = trace.split(RANKING, 1)[0]
    steps = tuple(s.strip() for s in _STEP.findall(trace) if s.strip())
    return PlannedAnswer(steps, RANKING in text)
