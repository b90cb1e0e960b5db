"""What a method asks of the models. Methods are generators: they ``yield`` a request (or a tuple of requests
that are independent and may run together) and receive the answer (or a list of answers, in order).

The runner owns the models: its scheduler puts the requests of many queries on each engine's queue (every engine
at work at once), counts every document, call and token in the query's ledger, and serves repeats from the
response cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from garen_infer.llm.types import Chat


@dataclass(frozen=True)
class Rerank:
    """Order these documents (corpus rows) by relevance to the query. Answer: the same rows, best first.
    Every row counts against the query's budget of distinct reranked documents (Reranker@k)."""

    rows: tuple[int, ...]


@dataclass(frozen=True)
class ScoreYesNo:
    """P(yes) that each text meets the query (Qwen3-Reranker style). Answer: one float per text."""

    texts: tuple[str, ...]
    role: str = "navigator"
    # The corpus rows each text stands for (a group's members, or one document), in the order of ``texts``. Model
    # backends read only the texts; the simulated oracle (llm/oracle.py) judges an item by its documents.
    rows: tuple[tuple[int, ...], ...] = ()
    documents: tuple[int, ...] = ()  # corpus rows among the texts, counted against the budget (LATTICE's slates)
    # An item may be judged by what it stands for: the embedding scorer then scores the normalised centroid of
    # its rows' embeddings instead of embedding its text (LATTICE's internal nodes); model scorers read the text.
    by_documents: bool = False


@dataclass(frozen=True)
class Generate:
    """Free generation for each chat. Answer: one string per chat."""

    chats: tuple[Chat, ...]
    role: str = "generator"
    documents: tuple[int, ...] = ()  # corpus rows shown in the chats, counted against the budget


@dataclass(frozen=True)
class ChatWithTools:
    """One agent turn: the model reads the chat and may call the tools (OpenAI-style function schemas).
    Answer: an ``AssistantTurn`` (its text and tool calls; no call = a final answer)."""

    chat: tuple[dict, ...]
    tools: tuple[dict, ...]
    role: str = "agent"


@dataclass(frozen=True)
class EncodeQuery:
    """The query's embedding by the index's embedding model (RGS's proximity-graph first stage). Answer: the
    vector. Its time is the query's model time under ``role``; it shows no document, so it costs no budget."""

    text: str
    role: str = "query_encoder"


Request = Rerank | ScoreYesNo | Generate | ChatWithTools | EncodeQuery


def shown_documents(request) -> tuple[int, ...]:
    """The corpus rows a request shows a model, which count against the query's budget (Reranker@k)."""
    if isinstance(request, Rerank):
        return request.rows
    return request.documents if isinstance(request, (ScoreYesNo, Generate)) else ()
