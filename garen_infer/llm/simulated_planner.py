"""SIMULATION, not a model: REPAIR's planning step reranker played from the relevance judgments (``models.generator:
{backend: oracle}``), so REPAIR can be measured on a CPU beside the methods that run with the oracle reranker.

It answers the reasoning reranking prompt (App. G Table 10, either layout) the way the prompt asks:
- the ranking: the window ordered exactly as the oracle reranker orders it (``llm/oracle.py``, the same draws:
  the judge plays the role ``reranker``), so every method faces the same noisy reranker;
- the plan: one step per judged-relevant document of the query (at most ``PLAN_STEPS``), each its first
  ``STEP_WORDS`` words: a planner that knows what evidence the answer needs. REPAIR's expansion is then measured
  under a plan as good as it gets; the numbers are NOT results of any model, and the run says so (its label).

The chat carries texts only, so the query and the passages are found again by their text (the query's as the
dataset gives it, a passage's as the prompt cuts it); a text it cannot place is an error, never a guess.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from garen_infer.errors import GarenError
from garen_infer.llm.oracle import NoisyJudge, OracleSpec
from garen_infer.llm.prompts import MAX_PASSAGE_WORDS, passage
from garen_infer.llm.types import Completion

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset


PLAN_STEPS = 3
STEP_WORDS = 32
_PROMPT = re.compile(r"\[Query\] (.*?)\s\[Documents\]\s(.*)", re.S)
_PASSAGE = re.compile(r"^\[(\d+)\] (.*)$", re.M)


class SimulatedPlanner:
    def __init__(self, dataset: Dataset, spec: dict, max_words: int = MAX_PASSAGE_WORDS):
        judge_spec = OracleSpec.from_models("generator", spec)
        self.judge = NoisyJudge(dataset.qrels, dataset.doc_ids, judge_spec, "reranker")
        self.name = f"simulated-planner:{self.judge.name}"
        self.query_ids = {q.text: q.id for q in dataset.queries}
        self.rows: dict[str, int] = {}
        for row, doc in enumerate(dataset.documents):
            self.rows.setdefault(passage(doc.full_text, max_words), row)
        self.plans = {qid: [" ".join(dataset.documents[dataset.doc_index[d]].full_text.split()[:STEP_WORDS])
                            for d, grade in judged.items() if grade > 0 and d in dataset.doc_index][:PLAN_STEPS]
                      for qid, judged in dataset.qrels.items()}

    def generate(self, chats) -> list[Completion]:
        return [self.answer(chat[-1]["content"]) for chat in chats]

    def answer(self, prompt: str) -> Completion:
        start = time.perf_counter()
        found = _PROMPT.search(prompt)
        if not found or found.group(1) not in self.query_ids:
            raise GarenError("the simulated planner reads GAREN's reasoning prompt for a query of this dataset; "
                             "this chat is neither")
        qid = self.query_ids[found.group(1)]
        rows = []
        for _, text in _PASSAGE.findall(found.group(2)):
            if text not in self.rows:
                raise GarenError(f"the simulated planner cannot place a passage of query '{qid}' in the corpus: "
                                 f"{text[:60]!r}")
            rows.append(self.rows[text])
        keys = [(self.judge.score(qid, (r,)), self.judge.draw(qid, (r,))) for r in rows]
        order = sorted(range(len(rows)), key=lambda i: keys[i], reverse=True)
        plan = "".join(f"Step {n}: {step}\n" for n, step in enumerate(self.plans.get(qid, []), start=1))
        text = f"[Reasoning Trace]\n{plan}[Document Ranking]\n" + " > ".join(f"[{i + 1}]" for i in order)
        return Completion(text=text, seconds=time.perf_counter() - start)


def simulated_planner(spec: dict, dataset: Dataset | None) -> SimulatedPlanner:
    if dataset is None or not dataset.qrels:
        name = getattr(dataset, "name", "?")
        raise GarenError(f"models.generator: the oracle plans from relevance judgments, and dataset '{name}' has none")
    return SimulatedPlanner(dataset, spec)
