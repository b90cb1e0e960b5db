"""The three tools of the RARG agent for one query: ``bash``, ``read`` and ``embed_recall`` (RARG sec. 3, App. A.3).

- ``embed_recall(scope_query)`` ranks the corpus with the embedder, writes the ranked paths (at most
  ``scope_size``) to ``scopes/scope_N.txt`` and returns only ``scopes/scope_N.txt -> scope_query``; with entry
  points on (RARG+), the best paragraphs of the top scope documents follow in ``<qr_paragraph>`` tags.
- ``bash(command)`` runs one checked pipeline in the sandbox. A search (rg or grep in it) shows at most
  ``max_matches`` matches of at most ``match_chars`` characters each, in scope order (rg runs with ``-j1``); with
  match reranking on (RARG++) and a scope file in the command, up to ``match_pool`` matches are collected and the
  best ``max_matches`` for the constructed query are shown, best first (skipped when there are no more than
  ``max_matches``). Any other output is cut at ``tool_result_chars``.
- ``read(path, offset, limit)`` returns lines ``offset``..``offset+limit-1`` (1-based) of a corpus or scope file.

A refused command or a malformed call returns a message that says why; nothing runs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from garen_infer.agent.command_rules import SEARCHERS, ParsedCommand, parse_command
from garen_infer.agent.excerpts import split_units
from garen_infer.agent.relevance import Relevance, constructed_query
from garen_infer.agent.sandbox import CORPUS_LINK, SCOPES, Refused, RunResult, Sandbox
from garen_infer.llm.tool_calls import ToolCall

READ_DEFAULT_LINES = 200
READ_MAX_LINES = 2000
READ_MAX_BYTES = 8 << 20
PARAGRAPH_TAG = re.compile(r"\n?<qr_paragraph[^>]*>.*?(?:</qr_paragraph>|\Z)", re.DOTALL)  # also one cut by the cap


@dataclass
class ToolOutcome:
    text: str  # what the agent reads
    refused: bool = False  # the sandbox refused the command (nothing ran)
    error: bool = False  # the call itself was wrong (unknown tool, missing argument)
    scope_line: str | None = None  # embed_recall's "scopes/scope_N.txt -> query", kept through compaction
    reranked: bool = False  # RARG++ reordered the matches


class Toolbox:
    def __init__(self, sandbox: Sandbox, files, relevance: Relevance, config):
        self.sandbox, self.files, self.relevance, self.config = sandbox, files, relevance, config
        self.scopes: dict[str, str] = {}  # "scopes/scope_1.txt" -> its query
        self.scope_rows: dict[str, list[int]] = {}

    def run(self, call: ToolCall) -> ToolOutcome:
        if call.error:
            return ToolOutcome(f"Error: {call.error}", error=True)
        args = call.arguments
        try:
            if call.name == "bash":
                return self.bash(_text_arg(args, "command"),
                                 args.get("rerank_query") if self.config.match_query == "generative" else None)
            if call.name == "read":
                return self.read(_text_arg(args, "path"), _int_arg(args, "offset", 1),
                                 _int_arg(args, "limit", READ_DEFAULT_LINES))
            if call.name == "embed_recall":
                return self.embed_recall(_text_arg(args, "scope_query"))
        except _BadArgument as why:
            return ToolOutcome(f"Error: {call.name}: {why}", error=True)
        return ToolOutcome(
            f"Error: there is no tool '{call.name}'; the tools are bash, read and embed_recall", error=True
        )

    # ---- embed_recall -----------------------------------------------------------------------------------------
    def embed_recall(self, scope_query: str) -> ToolOutcome:
        cfg = self.config
        query = " ".join(scope_query.split())
        rows = self.relevance.rank_corpus(query, cfg.scope_size)
        name = f"{SCOPES}/scope_{len(self.scopes) + 1}.txt"
        paths = [self.doc_path(r) for r in rows]
        (self.sandbox.workdir / name).write_text("".join(p + "\n" for p in paths), encoding="utf-8")
        self.scopes[name], self.scope_rows[name] = query, rows
        line = f"{name} -> {query}"
        text = line
        if cfg.init_paragraphs > 0:
            paragraphs = self.relevance.entry_paragraphs(
                query, rows[: cfg.init_docs], cfg.init_paragraphs, cfg.paragraph_min_chars, cfg.paragraph_max_chars
            )
            text += "".join(
                f'\n<qr_paragraph path="{self.doc_path(p.row)}">\n{p.text}\n</qr_paragraph>'
                for p in paragraphs
            )
        return ToolOutcome(_cap(text, cfg.tool_result_chars), scope_line=line)

    def doc_path(self, row: int) -> str:
        return f"{CORPUS_LINK}/{self.files.name(row)}"

    # ---- bash -------------------------------------------------------------------------------------------------
    def bash(self, command: str, rerank_query: str | None = None) -> ToolOutcome:
        cfg = self.config
        result = self.sandbox.run(command, unit_limit=cfg.match_pool if cfg.match_rerank else cfg.max_matches)
        if result.refused:
            return ToolOutcome(f"Refused: {result.refused}. Nothing was run.", refused=True)
        reranked = False
        if result.searches:
            text, reranked = self._matches(result, rerank_query)
        else:
            text = _cap(result.output, cfg.tool_result_chars)
        notes = []
        if result.timed_out:
            notes.append(f"[stopped: the command ran past {self.sandbox.limits.seconds:g} s]")
        if result.stderr.strip():
            notes.append("stderr: " + result.stderr.strip()[:1000])
        if not result.output.strip() and not result.timed_out:
            notes.append("(no matches)" if result.searches and result.status == 1 else "(no output; exit "
                         f"status {result.status})")
        text = "\n".join(part for part in [text.rstrip("\n"), *notes] if part)
        return ToolOutcome(_cap(text, cfg.tool_result_chars), reranked=reranked)

    def _matches(self, result: RunResult, rerank_query: str | None) -> tuple[str, bool]:
        cfg = self.config
        limit = cfg.match_pool if cfg.match_rerank else cfg.max_matches  # what the sandbox was asked to collect
        units = split_units(result.output)
        if result.cut:
            # stopped early: how much more was read depends on pipe timing, so only the first `limit` count
            units, total = units[:limit], f"more than {limit}"
        else:
            total = str(len(units))
        query_text = None
        if cfg.match_rerank and len(units) > cfg.max_matches:  # sec. 3.4: skipped when there are at most m
            if cfg.match_query == "generative":
                query_text = f"Instruct: {cfg.match_instruction}\nQuery: {rerank_query}" if rerank_query else None
            else:
                scope = self._scope_in(result.stages)
                if scope:
                    query_text = constructed_query(cfg.match_instruction, self.scopes[scope], _patterns(result.stages))
        if query_text:
            pool = units[: cfg.match_pool]
            shown = [pool[i] for i in self.relevance.rerank_matches(pool, query_text, cfg.max_matches, cfg.match_chars)]
            note = f"[{len(shown)} of {total} matches, best first by relevance to the scope query and the pattern]"
        else:
            shown = units[: cfg.max_matches]
            more = result.cut or len(units) > len(shown)
            note = (
                f"[the first {len(shown)} of {total} matches; narrow the pattern or read a file for more]"
                if more
                else ""
            )
        lines = [u if len(u) <= cfg.match_chars else u[: cfg.match_chars] + " [...]" for u in shown]
        return "\n".join(lines + ([note] if note else [])), query_text is not None

    def _scope_in(self, stages: list[ParsedCommand]) -> str | None:
        """The first scope file a command reads (``cat scopes/scope_2.txt | xargs ...``), if any."""
        for stage in stages:
            words = stage.positionals[1:] if stage.program == "xargs" else stage.positionals
            for word in words:
                name = os.path.normpath(word)
                if name in self.scopes:
                    return name
        return None

    # ---- read -------------------------------------------------------------------------------------------------
    def read(self, path: str, offset: int = 1, limit: int = READ_DEFAULT_LINES) -> ToolOutcome:
        try:
            real = self.sandbox.resolve(path)
        except Refused as why:
            return ToolOutcome(f"Refused: {why}.", refused=True)
        if not real.is_file():
            return ToolOutcome(f"Error: read: '{path}' is not a file", error=True)
        if offset < 1 or limit < 1:
            return ToolOutcome("Error: read: offset and limit must be at least 1", error=True)
        limit = min(limit, READ_MAX_LINES)
        with open(real, "rb") as handle:
            lines = handle.read(READ_MAX_BYTES).decode("utf-8", errors="replace").splitlines()
        chunk = lines[offset - 1 : offset - 1 + limit]
        text = "\n".join(chunk) if chunk else f"(the file has {len(lines)} lines)"
        if offset - 1 + limit < len(lines):
            text += (
                f"\n[lines {offset}-{offset + len(chunk) - 1} of {len(lines)}; read from "
                f"offset={offset + len(chunk)} for more]"
            )
        return ToolOutcome(_cap(text, self.config.tool_result_chars))


def strip_paragraphs(text: str) -> str:
    """The text without its <qr_paragraph> blocks (compaction clears them, sec. 3.3)."""
    return PARAGRAPH_TAG.sub("", text).rstrip("\n")


def _patterns(stages: list[ParsedCommand]) -> list[str]:
    patterns = []
    for stage in stages:
        if stage.program in SEARCHERS:
            patterns += stage.patterns
        elif stage.program == "xargs" and stage.positionals[0] in SEARCHERS:
            patterns += parse_command(stage.positionals).patterns
    return patterns


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[output cut at {limit} characters]"


class _BadArgument(Exception):
    pass


def _text_arg(args: dict, name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise _BadArgument(f"needs the argument '{name}' (a non-empty string)")
    return value


def _int_arg(args: dict, name: str, default: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _BadArgument(f"'{name}' must be an integer, not {value!r}") from None
