"""Dollars per query from token counts and per-token prices (GAREN Table 7 prices the LLM calls of retrieval with
OpenRouter's per-token rates). Reusable by any report: give it ledger summaries and a price per role.

Table 7's totals pin the prices it used: Qwen3-Next-80B-A3B-Instruct at $0.09 per million input tokens and
$1.10 per million output tokens gives all three LLM rows to the cent (GAREN's reranker: $0.0094 for 48,938 +
4,523 tokens and $0.0091 for 45,880 + 4,524; LATTICE's traversal: $0.0229 for 85,419 + 13,859, so LATTICE ran
on the same model; $0.10 / $1.00 fits the GAREN rows but gives LATTICE $0.0224), and the navigator
(Qwen3-Reranker-4B) at $0.02 per million gives its $0.0015 for 76,093 + 160.
Prices change: pass your own (a role's ``price: {input_per_million, output_per_million}`` in the preset).
"""

from __future__ import annotations

from dataclasses import dataclass

from garen_infer.errors import GarenError


@dataclass(frozen=True)
class TokenPrices:
    input_per_million: float  # dollars per million input (processed) tokens
    output_per_million: float  # dollars per million output (generated) tokens

    def dollars(self, input_tokens: float, output_tokens: float) -> float:
        return (input_tokens * self.input_per_million + output_tokens * self.output_per_million) / 1e6


# what Table 7's totals imply (see the module docstring), by model name
TABLE7_PRICES = {
    "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8": TokenPrices(0.09, 1.10),
    "Qwen/Qwen3-Next-80B-A3B-Instruct": TokenPrices(0.09, 1.10),
    "Qwen/Qwen3-Reranker-4B": TokenPrices(0.02, 0.02),
}


def prices_for(models: dict) -> dict[str, TokenPrices]:
    """Each role's prices: its spec's ``price`` or, for a model Table 7 priced, that price; roles without either
    (embedding roles, unpriced models) are left out."""
    prices = {}
    for role, spec in (models or {}).items():
        spec = spec or {}
        if "price" in spec:
            try:
                prices[role] = TokenPrices(**spec["price"])
            except TypeError as err:
                raise GarenError(f"models.{role}.price: {err}; give input_per_million and output_per_million") from err
        elif spec.get("model") in TABLE7_PRICES:
            prices[role] = TABLE7_PRICES[spec["model"]]
    return prices


def query_cost(ledger: dict, prices: dict[str, TokenPrices]) -> dict[str, float]:
    """Dollars per priced role for one query's ledger summary (``QueryLedger.summary()``), and their total."""
    out = {role: p.dollars(ledger["roles"].get(role, {}).get("input_tokens", 0),
                           ledger["roles"].get(role, {}).get("output_tokens", 0))
           for role, p in prices.items()}
    out["total"] = sum(out.values())
    return out


def mean_cost(ledgers: list[dict], prices: dict[str, TokenPrices]) -> dict[str, float]:
    """Mean dollars per query, per role and in total, over a run's ledgers ({} when nothing is priced)."""
    if not prices or not ledgers:
        return {}
    costs = [query_cost(ledger, prices) for ledger in ledgers]
    return {f"mean_cost_usd_{key}": round(sum(c[key] for c in costs) / len(costs), 6) for key in costs[0]}
