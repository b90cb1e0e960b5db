"""Readable transcripts of agent runs: what the model said, each tool call with its arguments, whether it ran, was
refused or was malformed, and what came back (cut to ``result_chars`` so a trace stays small; the length of the
full result is kept). Saved in the run's ``trace.jsonl`` under ``trace.transcript`` of each query.

Print them with ``python -m garen_infer.agent.transcript RUN_FOLDER [--query QID]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


class Transcript:
    def __init__(self, result_chars: int = 2000):
        self.result_chars = result_chars
        self.events: list[dict] = []

    def _cut(self, text: str) -> str:
        return text if len(text) <= self.result_chars else text[: self.result_chars] + " [...]"

    def assistant(self, turn: int, text: str, calls) -> None:
        self.events.append(
            {
                "turn": turn,
                "kind": "assistant",
                "text": self._cut(text),
                "tool_calls": [
                    {"name": c.name, "arguments": c.arguments, **({"error": c.error} if c.error else {})}
                    for c in calls
                ],
            }
        )

    def tool_result(self, turn: int, call, outcome) -> None:
        status = "refused" if outcome.refused else "error" if outcome.error else "ok"
        self.events.append({
            "turn": turn, "kind": "tool", "name": call.name, "arguments": call.arguments, "status": status,
            "result": self._cut(outcome.text), "result_chars": len(outcome.text),
            **({"reranked": True} if outcome.reranked else {}),
        })

    def note(self, turn: int, text: str) -> None:
        self.events.append({"turn": turn, "kind": "note", "text": text})

    def compaction(self, turn: int, tokens_after: int) -> None:
        self.events.append({"turn": turn, "kind": "compaction", "tokens_after": tokens_after})


def render(record: dict) -> str:
    """One query's trace record as text, the way one reads a terminal session."""
    trace = record.get("trace", {})
    lines = [f"=== query {record['qid']}: {trace.get('query', '')}"]
    for event in trace.get("transcript", []):
        turn = f"[turn {event['turn']}]"
        if event["kind"] == "assistant":
            if event["text"].strip():
                lines.append(f"{turn} model: {event['text'].strip()}")
            for call in event["tool_calls"]:
                if call.get("error"):
                    lines.append(f"{turn} unreadable tool call: {call['error']}")
        elif event["kind"] == "tool":
            lines.append(f"{turn} {event['name']}({_arguments(event['arguments'])})  [{event['status']}]")
            lines += ["    " + line for line in event["result"].splitlines()]
        elif event["kind"] == "note":
            lines.append(f"{turn} harness: {event['text']}")
        else:
            lines.append(f"{turn} context compacted (about {event['tokens_after']} tokens left)")
    agent = trace.get("agent", {})
    lines.append(f"--- stop: {agent.get('stop')}; turns {agent.get('turns')}; tool calls "
                 f"{agent.get('tool_calls')}; refused {agent.get('refused')}")
    lines.append(
        "--- final ranking: "
        + (", ".join(record.get("ranking", [])[: trace.get("answer_size", 10)]) or "(none)")
    )
    return "\n".join(lines)


def _arguments(arguments: dict) -> str:
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m garen_infer.agent.transcript", description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a run folder (or its trace.jsonl)")
    parser.add_argument("--query", action="append", help="only this query id (repeatable)")
    args = parser.parse_args(argv)
    path = Path(args.run)
    path = path / "trace.jsonl" if path.is_dir() else path
    if not path.is_file():
        print(f"{path}: no trace.jsonl here", file=sys.stderr)
        return 2
    for raw in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(raw)
        if args.query and record["qid"] not in args.query:
            continue
        if "transcript" in record.get("trace", {}):
            print(render(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
