"""RARG, the Relevance-Aware RipGrep search agent (Li et al. 2026, rarg-paper.txt), in the BRIGHT retrieval
setting: the agent searches the corpus as files with ripgrep, guided by the embedder, and answers with a ranked
list of document paths, which is this method's ranking.

    rarg    document-level relevance: embed_recall writes a scope file of the corpus ranked by the embedder, and
            rg scans it in that order (-j1) (sec. 3.2)
    rarg+   + entry points: embed_recall also shows the top-10 query-relevant paragraphs of the top scope
            documents (sec. 3.3)
    rarg++  + match-level relevance: a scoped rg collects up to M = 500 matches and shows the m = 60 the embedder
            ranks best for a query built from the scope query and the pattern's keywords (sec. 3.4). It keeps
            RARG+'s entry points: the paper's case study has "both initialized variants" (RARG+ and RARG++).

Budget: the agent has no reranker budget; its cost is turns, tool calls and tokens (ledger role ``agent``, and
``trace.agent`` per query). The loop and the tools are in ``garen_infer/agent``.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from garen_infer.agent.answer import parse_ranking
from garen_infer.agent.loop import run_agent
from garen_infer.agent.prompts import MATCH_INSTRUCTION, NUDGE, USER_PROMPT, system_prompt, tool_schemas
from garen_infer.agent.relevance import Relevance
from garen_infer.agent.sandbox import Limits, Sandbox
from garen_infer.agent.tools import Toolbox
from garen_infer.agent.transcript import Transcript
from garen_infer.index.corpus_files import CorpusFiles
from garen_infer.llm.permutation import answer_part
from garen_infer.llm.problems import UNREADABLE
from garen_infer.llm.roles import AGENT_MAX_TOKENS
from garen_infer.methods.base import Method, QueryState, Search
from garen_infer.settings import AtLeast, AtMost, Count, NonNegative, Positive

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.index.folder import IndexFolder


@dataclass
class RargConfig:
    # ---- the loop (sec. 3.1, 4.1; App. A.2) ----
    max_turns: Count = 100  # sec. 4.1: turns capped at 100
    answer_size: Count = 10  # App. A.2: the answer ranks exactly ten document paths (BRIGHT)
    # ---- embed_recall (sec. 3.2) ----
    scope_size: Count = 10_000  # sec. 3.2: the scope file holds at most 10,000 ranked paths
    # ---- RARG+ entry points (sec. 3.3) ----
    init_paragraphs: NonNegative = 0  # top paragraphs shown after the scope mapping (RARG+ and RARG++: 10)
    init_docs: Count = 20  # X, the top scope documents cut into paragraphs (sec. 3.3 says "top-X"; X is not given)
    paragraph_min_chars: Count = 400  # sec. 3.3: paragraphs of 400-1000 characters
    paragraph_max_chars: Annotated[int, AtLeast("paragraph_min_chars")] = 1000  # sec. 3.3, as above
    # ---- RARG++ match-level relevance (sec. 3.4, 4.1) ----
    match_rerank: bool = False  # RARG++: True
    match_pool: Count = 500  # M: matches collected for reranking (sec. 4.1)
    match_query: Literal["constructed", "generative"] = "constructed"  # sec. 3.4; "generative": bash gets rerank_query
    match_instruction: str = MATCH_INSTRUCTION  # the "Instruct:" line of the constructed query (wording ours)
    match_embedding: dict = field(default_factory=dict)  # EmbeddingParams of a separate match embedder; {} = the
    #   index's (the paper's BRIGHT runs rank documents with NV-Embed and matches with Qwen3-Embedding-4B, sec. 4.1)
    # ---- observation caps (sec. 4.1, BRIGHT; BrowseComp-Plus used 30 and 1,000) ----
    max_matches: Annotated[int, AtLeast(1), AtMost("match_pool")] = 60  # m: matches shown per search (m < M)
    match_chars: Count = 500  # each match cut to 500 characters
    tool_result_chars: Count = 50_000  # C: any tool result cut to DCI's 50 KB (Level-3 compaction, step 1)
    # ---- compaction (sec. 3.1, 4.1) ----
    keep_tool_results: Count = 40  # results of the 40 most recent tool calls survive compaction
    compaction_threshold: Count = 230_000  # tokens of context before compaction starts
    context_limit: Count | None = None  # tokens the agent's prompt may hold: compaction always keeps the context under
    #   it; None: models.agent's max_length, else its max_model_len minus its sampling.max_tokens (settle), else what
    #   a served agent's server lists (GET /models, read by the openai backend at the first turn), else none
    # ---- harness (not in the paper) ----
    command_seconds: Positive = 20.0  # wall-clock (and CPU) limit of one bash command
    backfill: Literal["none", "scope"] = "none"  # "scope": after the agent's list, the latest scope's order
    nudges: NonNegative = 0  # a reply with neither a tool call nor a ranking gets a reminder (up to this many
    #   times) instead of ending the episode; for small models (the CPU preset), the paper's loop has none
    transcript_chars: Count = 2000  # each tool result kept in the transcript up to this length


@dataclass
class RargPlusConfig(RargConfig):
    init_paragraphs: int = 10  # sec. 3.3: the top-10 query-relevant paragraphs


@dataclass
class RargPlusPlusConfig(RargPlusConfig):
    match_rerank: bool = True  # sec. 3.4


class Rarg(Method):
    name, Config, index_stages, roles = "rarg", RargConfig, ("embeddings", "corpus_files"), ("agent",)

    def __init__(self, config: RargConfig, index: IndexFolder, dataset: Dataset):
        super().__init__(config, index, dataset)
        self._workspace = Path(tempfile.mkdtemp(prefix="garen-rarg-"))  # one sandbox folder per query inside
        weakref.finalize(self, shutil.rmtree, str(self._workspace), True)

    @cached_property
    def files(self) -> CorpusFiles:
        return CorpusFiles.open(self.index)

    @cached_property
    def relevance(self) -> Relevance:
        match_embedder = None
        if self.config.match_embedding:
            from garen_infer.llm.embeddings import Embedder, EmbeddingParams

            match_embedder = Embedder(EmbeddingParams(**self.config.match_embedding))
        return Relevance(self.index, [d.full_text for d in self.dataset.documents], match_embedder)

    @classmethod
    def settle(cls, config: RargConfig, models: dict) -> RargConfig:
        if config.context_limit is None:
            config = replace(config, context_limit=prompt_limit_of((models or {}).get("agent") or {}))
        return config

    def search(self, state: QueryState) -> Search:
        cfg = self.config
        workdir = Path(tempfile.mkdtemp(prefix="query-", dir=self._workspace))
        try:
            sandbox = Sandbox(self.files.docs_dir, workdir, Limits(seconds=cfg.command_seconds))
            toolbox = Toolbox(sandbox, self.files, self.relevance, cfg)
            transcript = Transcript(cfg.transcript_chars)
            result = yield from run_agent(
                system_prompt(cfg.answer_size, cfg.init_paragraphs > 0, cfg.match_rerank),
                USER_PROMPT.format(query=state.query.text),
                tool_schemas(generative_rerank=cfg.match_rerank and cfg.match_query == "generative"),
                toolbox, transcript, cfg, is_answer=lambda text: bool(self.ranking_of(text)),
                nudge=NUDGE.format(query=" ".join(state.query.text.split()).replace('"', "'")),
            )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        ranking = self.ranking_of(result.answer)
        answered = len(ranking)
        if result.stop == "answer" and not answered:  # a final answer that names no document is counted
            _, thought = answer_part(result.answer, ranking=False)
            state.answer_problems.append(("agent", thought[0] if thought else UNREADABLE))
        if cfg.backfill == "scope" and toolbox.scope_rows:
            listed = set(ranking)
            ranking += [r for r in list(toolbox.scope_rows.values())[-1] if r not in listed]
        agent = {k: v for k, v in asdict(result).items() if k != "answer"}
        state.trace.update(
            query=state.query.text, agent={**agent, "answered": answered}, answer=result.answer[: cfg.transcript_chars],
            scopes=dict(toolbox.scopes), transcript=transcript.events, answer_size=cfg.answer_size,
        )
        return ranking

    def ranking_of(self, answer: str) -> list[int]:
        return parse_ranking(answer, self.files.row_of_name, self.files.row_of_id, self.config.answer_size)

    @staticmethod
    def summarize(records: list[dict]) -> dict:
        """Per-query means of the agent's work: turns, tool calls (by tool), refusals, documents answered."""
        agents = [r["trace"]["agent"] for r in records if "agent" in r.get("trace", {})]
        if not agents:
            return {}
        n = len(agents)
        tools = sorted({name for a in agents for name in a["tool_calls"]})
        counted = ("turns", "refused", "errors", "reranked", "compactions", "nudges", "answered")
        out = {f"mean_{key}": round(sum(a.get(key, 0) for a in agents) / n, 4) for key in counted}
        out["mean_tool_calls"] = round(sum(sum(a["tool_calls"].values()) for a in agents) / n, 4)
        out.update(
            {
                f"mean_calls_{name}": round(sum(a["tool_calls"].get(name, 0) for a in agents) / n, 4)
                for name in tools
            }
        )
        out["answered_share"] = round(sum(a["stop"] == "answer" for a in agents) / n, 4)
        return out


def prompt_limit_of(spec: dict) -> int | None:
    """The prompt tokens an agent model spec allows: its ``max_length``, else ``max_model_len`` minus the answer's
    ``max_tokens`` (the agent role's default 1024 when the spec sets none); None when the spec names neither."""
    if spec.get("max_length"):
        return int(spec["max_length"])
    if spec.get("max_model_len"):
        return int(spec["max_model_len"]) - int((spec.get("sampling") or {}).get("max_tokens", AGENT_MAX_TOKENS))
    return None


class RargPlus(Rarg):
    name, Config = "rarg+", RargPlusConfig


class RargPlusPlus(Rarg):
    name, Config = "rarg++", RargPlusPlusConfig


METHOD = Rarg
RARG_PLUS = RargPlus
RARG_PLUS_PLUS = RargPlusPlus
