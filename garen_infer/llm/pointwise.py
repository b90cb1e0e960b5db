"""The reranker role in pointwise mode: score each document of a window with a yes/no scorer, sort by score.

``models.reranker: {mode: pointwise, backend: ...}`` takes any scorer a scorer role takes (embedding, an LLM's
P(yes) through transformers / vLLM / an OpenAI-compatible server, or a trained scorer), so a model trained on
(query, document) pairs reranks for every method that yields ``Rerank`` requests, with no change to the method.

Windows overlap (a sliding window keeps h documents, GAREN keeps the top h of each window): a document scored
once for a query is never scored again in the same run. The ledger gets one Completion per window whose tokens
and seconds are those of the documents scored for the first time; a window made only of documents seen before
(or answered by the response cache) counts as a cache hit. The budget is untouched: the scheduler admits every
row of a window, as for a listwise reranker.
"""

from __future__ import annotations

from garen_infer.llm.types import Completion, ScoreJob


class PointwiseReranker:
    def __init__(self, scorer, doc_texts: list[str]):
        self.scorer, self.doc_texts = scorer, doc_texts
        self.name = f"{scorer.name}:pointwise"
        self._scores: dict[tuple[str, int], float] = {}  # (query text, row) -> P(yes), for this run

    def rerank(self, jobs) -> list[tuple[list[int], Completion]]:
        new = [
            pair
            for pair in dict.fromkeys((job.query, row) for job in jobs for row in job.rows)
            if pair not in self._scores
        ]
        first_seen: dict[tuple[str, int], Completion] = {}
        if new:
            query_ids = {job.query: job.query_id for job in jobs}
            asked = [ScoreJob(query, self.doc_texts[row], query_ids[query], (row,)) for query, row in new]
            for pair, completion in zip(new, self.scorer.score(asked)):
                self._scores[pair] = completion.score
                first_seen[pair] = completion
        return [self._order(job, first_seen) for job in jobs]

    def _order(self, job, first_seen: dict) -> tuple[list[int], Completion]:
        rows = list(job.rows)
        scores = [self._scores[(job.query, row)] for row in rows]
        order = sorted(range(len(rows)), key=lambda i: -scores[i])  # stable: ties keep the window's order
        paid = [first_seen.pop((job.query, row)) for row in rows if (job.query, row) in first_seen]
        completion = Completion(
            text=" > ".join(f"[{i + 1}]" for i in order),
            input_tokens=sum(c.input_tokens for c in paid),
            output_tokens=sum(c.output_tokens for c in paid),
            truncated_tokens=sum(c.truncated_tokens for c in paid),
            cached=all(c.cached for c in paid),  # nothing reached a model (also true when nothing was new)
            seconds=sum(c.seconds for c in paid),
            extra={"scored": len(paid), "reused": len(rows) - len(paid)},
            problems=[kind for c in paid for kind in c.problems],  # the documents' scores' (a NaN, a retry)
            scores=tuple(scores[i] for i in order),  # each row's P(yes) (the scorer's own), in the new order
        )
        return [rows[i] for i in order], completion
