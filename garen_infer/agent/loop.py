"""The agent loop for one query, as a generator: it yields one ``ChatWithTools`` per turn and receives the model's
``AssistantTurn``, so the scheduler batches turns across queries, the ledger counts every call and token, and the
response cache replays a finished conversation without a model (DCI-Agent-Lite's loop; RARG sec. 3.1):

    context = system prompt + the query
    for turn in 1..max_turns:
        compact the context if it is too long (and always until it fits the model's prompt limit)
        still too long for the model (nothing left to clear): stop, never send a chat to be cut
        reply = model(context, tools)              (the last turn is told to answer now)
        the backend cut the chat's middle anyway: drop the reply, clear to the limit the cut shows, ask once
            more; cut again: stop
        the server refused the chat as too long (no limit was known): stop
        the reply names the model's prompt limit (a served max_model_len): keep later chats under it
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
    may hold; None: none until a backend's cut shows one) and nudges; a reply without a tool
    call for which ``is_answer`` is false is replaced in the context by ``nudge`` instead of ending the episode,
    ``config.nudges`` times (the transcript keeps the reply)."""
    context = Context(system, user)
    result = AgentResult(answer="", stop="turn_cap", turns=0)
    schemas = tuple(tools)
    nudges_left, limit = config.nudges, config.context_limit
    for turn in range(1, config.max_turns + 1):
        last = turn == config.max_turns
        if last:
            context.add_user(TURN_LIMIT_NOTE)
        reply, limit = yield from _reply_to_a_whole_chat(context, schemas, config, limit, transcript, turn)
        if reply is None:
            result.stop = "context_full"
            break
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


def _reply_to_a_whole_chat(
    context: Context, schemas: tuple, config, limit: int | None, transcript: Transcript, turn: int,
) -> Generator[ChatWithTools, AssistantTurn, tuple[AssistantTurn | None, int | None]]:
    """The model's reply to the context compacted to fit ``limit``, and the limit as now known; None for the reply
    when the context cannot fit. The context's length is an estimate between model calls, so a backend may still cut
    the middle of what is sent (its newest results): such a reply is not used, and the turn is asked once more with
    the context measured by that call and cleared to the backend's limit, which the cut shows (its prompt's kept
    tokens); when even that is cut, or nothing is left to clear, there is no reply. A server does not cut: it refuses
    an over-long chat, and there is no reply either. A reply that names the model's prompt limit (``prompt_limit``:
    a served model's context length minus the turn's max_tokens) is the limit of every later turn, or caps the one
    configured."""
    for _ in range(2):
        if context.compact_if_long(config.compaction_threshold, config.keep_tool_results, limit):
            transcript.compaction(turn, context.length_estimate())
        if limit is not None and context.length_estimate() > limit:
            transcript.note(turn, f"the context holds about {context.length_estimate()} tokens with every older tool "
                                  f"result cleared, more than the model's {limit}: the episode ends here")
            return None, limit
        sent, chars = context.snapshot(), context.chars()
        reply = yield ChatWithTools(sent, schemas)
        if reply.refused:
            transcript.note(turn, f"the server refused this chat of about {context.length_estimate()} tokens as longer "
                                  "than the model's context: the episode ends here")
            return None, limit
        if reply.prompt_limit:  # a limit set above what the server holds would only get chats refused
            limit = reply.prompt_limit if limit is None else min(limit, reply.prompt_limit)
        if not reply.truncated_tokens:
            context.saw_model_call(reply.input_tokens, reply.output_tokens, chars)
            return reply, limit
        context.saw_model_call(reply.input_tokens + reply.truncated_tokens, 0, chars)
        limit = reply.input_tokens if limit is None else min(limit, reply.input_tokens)
        transcript.note(turn,
                        f"the model's limit cut {reply.truncated_tokens} tokens from the middle of this chat: its "
                        f"reply is not used, and older tool results are cleared to fit {limit} tokens")
    transcript.note(turn, "the chat was cut again: the episode ends here")
    return None, limit
