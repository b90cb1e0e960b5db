"""What one query cost, per role: the budget of Reranker@k and everything a fair comparison needs, and every
answer that was not what we asked for (by kind: ``Completion.problems``, plus ``cut_at_max_tokens`` from the
engine's ``finish_reason``), the way rank_llm's ResponseAnalyzer counts format errors."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from garen_infer.errors import GarenError
from garen_infer.llm.problems import CONTENT_NOT_TEXT, CONTEXT_REFUSED, CUT_AT_MAX_TOKENS
from garen_infer.llm.types import Completion


class BudgetExceeded(GarenError):
    """A method tried to send more distinct documents to the reranker than its budget allows (a method bug)."""


@dataclass
class RoleCost:
    requests: int = 0  # what the method asked for (cache hits included)
    model_calls: int = 0  # what actually reached a model
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    truncated_prompts: int = 0  # requests whose prompt lost its middle to fit the model's limit (cache hits included)
    truncated_tokens: int = 0  # prompt tokens those cuts removed
    problems: dict[str, int] = field(default_factory=dict)  # answers by problem kind (cache hits included)


@dataclass
class QueryLedger:
    budget: int | None = None  # distinct documents the reranker may see; None = unlimited
    reranked: set = field(default_factory=set)
    roles: dict[str, RoleCost] = field(default_factory=dict)

    def admit_documents(self, rows) -> None:
        """Record documents sent to the reranker; refuse before the budget would be exceeded."""
        new = set(rows) - self.reranked
        if self.budget is not None and len(self.reranked) + len(new) > self.budget:
            raise BudgetExceeded(
                f"reranking {len(new)} new documents would exceed the budget: {len(self.reranked)} of "
                f"{self.budget} used"
            )
        self.reranked |= new

    def record(self, role: str, completion: Completion) -> None:
        cost = self.roles.setdefault(role, RoleCost())
        cost.requests += 1
        cost.cache_hits += completion.cached
        cost.model_calls += not completion.cached
        cost.input_tokens += completion.input_tokens
        cost.output_tokens += completion.output_tokens
        cost.seconds += completion.seconds
        cost.truncated_prompts += completion.truncated_tokens > 0
        cost.truncated_tokens += completion.truncated_tokens
        for kind in answer_problems(completion):
            self.count_problem(role, kind)

    def count_problem(self, role: str, kind: str) -> None:
        """One answer of ``role`` that was not what we asked for, found where the answer is read."""
        cost = self.roles.setdefault(role, RoleCost())
        cost.problems[kind] = cost.problems.get(kind, 0) + 1

    def summary(self) -> dict:
        total = RoleCost()
        for cost in self.roles.values():
            for name in vars(total):
                if name != "problems":
                    setattr(total, name, getattr(total, name) + getattr(cost, name))
        return {
            "budget_used": len(self.reranked),
            "budget": self.budget,
            "requests": total.requests,
            "model_calls": total.model_calls,
            "cache_hits": total.cache_hits,
            "input_tokens": total.input_tokens,
            "output_tokens": total.output_tokens,
            "model_seconds": round(total.seconds, 4),
            "truncated_prompts": total.truncated_prompts,
            "truncated_tokens": total.truncated_tokens,
            "problems": dict(sorted(sum((Counter(c.problems) for c in self.roles.values()), Counter()).items())),
            "roles": {role: {k: (round(v, 4) if isinstance(v, float)
                                 else dict(sorted(v.items())) if isinstance(v, dict) else v)
                             for k, v in vars(c).items()} for role, c in self.roles.items()},
        }


def answer_problems(completion: Completion) -> list[str]:
    """What the ledger counts for one answer: the problems its parser named, ``cut_at_max_tokens`` when the
    engine stopped it at ``max_tokens`` (a cut answer may still parse: it is counted either way), and
    ``content_not_text`` when a server sent its text as content parts, ``context_refused`` when it refused the
    chat. These are read from what the cache and its waiting askers share (``finish_reason``, ``extra``), so a
    replayed answer, or one another query's identical request took, counts the same."""
    extra = completion.extra or {}
    marked = [(completion.finish_reason == "length", CUT_AT_MAX_TOKENS),
              (bool(extra.get("content_not_text")), CONTENT_NOT_TEXT), (bool(extra.get("refused")), CONTEXT_REFUSED)]
    return [*completion.problems, *(kind for found, kind in marked if found and kind not in completion.problems)]

