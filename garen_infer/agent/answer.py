"""Reading the agent's final answer as a ranking of corpus rows.

The prompt asks for ``Final ranking:`` and a numbered list of ``corpus/<file>`` paths (RARG App. A.2: a ranked
list of ten document paths). Models drift from formats, so the reading is lenient but never guesses:
- after the last ``Final ranking`` header, every word that names a corpus file (``corpus/4983.txt``,
  ``4983.txt``) or a document id (``4983``) counts, in order;
- reasoning inside ``<think>`` never counts, and a thought that never closed leaves no answer;
- without the header, file names anywhere in the answer count, bare ids do not (a year in prose could be a
  document id);
- list numbers (``1.``, ``2)``) are skipped, each document counts once, at most ``answer_size`` are kept;
- a file is matched by its exact name, never by a shortened form (DCI's scorer falls back to base names, which
  can confuse two documents; Li et al., "Beyond Semantic Similarity: Rethinking Retrieval for Agentic Search
  via Direct Corpus Interaction", arXiv 2605.05242, and its DCI-Agent-Lite code).
"""

from __future__ import annotations

import re

from garen_infer.llm.permutation import answer_part

_HEADER = re.compile(r"final\s+ranking\s*:?", re.IGNORECASE)
_LIST_NUMBER = re.compile(r"\(?\d{1,3}[.):]")
_WORDS = re.compile(r"[\s\"'`<>\[\]{}|]+")


def parse_ranking(answer: str, row_of_name: dict[str, int], row_of_id: dict[str, int], size: int) -> list[int]:
    text, _ = answer_part(answer, ranking=False)
    headers = list(_HEADER.finditer(text))
    if headers:
        text = text[headers[-1].end() :]
    else:
        row_of_id = {}  # bare ids only inside the list: in prose a year or a count could be a document id
    rows: list[int] = []
    for raw in _WORDS.split(text):
        if not raw or _LIST_NUMBER.fullmatch(raw):
            continue
        word = raw.strip(".,;:()*")
        name = word.rsplit("/", 1)[-1]
        row = row_of_name.get(name)
        if row is None:
            row = row_of_id.get(word)
        if row is not None and row not in rows:
            rows.append(row)
            if len(rows) == size:
                break
    return rows
