"""The agent loop for one query, as a generator: it yields one ``ChatWithTools`` per turn and receives the model's
``AssistantTurn``, so the scheduler batches turns across queries, the ledger counts every call and token, and the
response cache replays a finished conversation without a model (DCI-Agent-Lite's loop; RARG sec. 3.1):

    context = system prompt + the query
    for turn in 1..max_turns:
        compact the context if it is too long (and always until it fits the model's prompt limit)
        still too long for the model (nothing left to clear): stop, never send a chat to be cut
        reply = model(context, tools)              (the last turn is told to answer now)
        no tool call in reply: it is the final answer; stop   (optionally: no ranking either -> remind, go on)
        run each tool call, append its result
    return the final answer's text

Tool call ids are renamed ``call_<turn>_<k>``: servers invent random ids, and an id in a later prompt would make
every rerun a cache miss. A call that cannot be read is answered with a note saying why; nothing runs.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace

from garen_infer.agent.compaction import Context
from garen_infer.agent.prompts import TURN_LIMIT_NOTE, UNREADABLE_CALL
from garen_infer.agent.tools import Toolbox
from garen_infer.agent.transcript import Transcript
from garen_infer.llm.requests import ChatWithTools
from garen_infer.llm.tool_calls import AssistantTurn


@dataclass
class AgentResult:
    answer: str  # the final answer's text ("" when the loop ended without one)
    stop: str  # "answer" | "turn_cap" | "context_full"
    turns: int
    tool_calls: dict[str, int] = field(default_factory=dict)  # by tool name ("unreadable" for broken calls)
    refused: int = 0  # commands the sandbox refused
    errors: int = 0  # calls with a wrong tool name or arguments, or that could not be read
    reranked: int = 0  # searches whose matches RARG++ reordered
    compactions: int = 0
    nudges: int = 0  # replies without a call or a ranking answered with a reminder (harness option)


def run_agent(
    system: str, user: str, tools: list[dict], toolbox: Toolbox, transcript: Transcript, config,
    is_answer: Callable[[str], bool] = bool, nudge: str = "",
) -> Generator[ChatWithTools, AssistantTurn, AgentResult]:
    """``config`` gives max_turns, compaction_threshold, keep_tool_results, context_limit (tokens the model's prompt
    may hold; None: no limit) and nudges; a reply without a tool
    call for which ``is_answer`` is false is replaced in the context by ``nudge`` instead of ending the episode,
    ``config.nudges`` times (the transcript keeps the reply)."""
    context = Context(system, user)
    result = AgentResult(answer="", stop="turn_cap", turns=0)
    schemas = tuple(tools)
    nudges_left = config.nudges
    for turn in range(1, config.max_turns + 1):
        last = turn == config.max_turns
        if last:
            context.add_user(TURN_LIMIT_NOTE)
        if context.compact_if_long(config.compaction_threshold, config.keep_tool_results, config.context_limit):
            transcript.compaction(turn, context.length_estimate())
        if config.context_limit is not None and context.length_estimate() > config.context_limit:
            result.stop = "context_full"
            transcript.note(turn, f"the context holds about {context.length_estimate()} tokens with every older tool "
                                  f"result cleared, more than the model's {config.context_limit}: the episode ends here")
            break
        sent, chars = context.snapshot(), context.chars()
        reply = yield ChatWithTools(sent, schemas)
        context.saw_model_call(reply.input_tokens, reply.output_tokens, chars)
        result.turns = turn
        calls = [replace(c, id=f"call_{turn}_{k}") for k, c in enumerate(reply.tool_calls)]
        readable = [c for c in calls if not c.error]
        transcript.assistant(turn, reply.text, calls)
        if not calls and not last and nudges_left and not is_answer(reply.text):
            # the reply is left out of the context: a small model otherwise repeats its own failed reply
            nudges_left -= 1
            context.add_user(nudge)
            transcript.note(turn, nudge)
            result.nudges += 1
            continue
        if not calls or last:
            result.answer, result.stop = reply.text, "answer" if not calls else "turn_cap"
            break
        context.add_assistant(reply.text, readable)
        for call in readable:
            outcome = toolbox.run(call)
            context.add_result(call, outcome)
            transcript.tool_result(turn, call, outcome)
            result.tool_calls[call.name] = result.tool_calls.get(call.name, 0) + 1
            result.refused += outcome.refused
            result.errors += outcome.error
            result.reranked += outcome.reranked
        unreadable = [c for c in calls if c.error]
        if unreadable:
            result.tool_calls["unreadable"] = result.tool_calls.get("unreadable", 0) + len(unreadable)
            result.errors += len(unreadable)
            note = UNREADABLE_CALL.format(why="; ".join(c.error for c in unreadable if c.error))
            context.add_user(note)
            transcript.note(turn, note)
    result.compactions = context.compactions
    return result
