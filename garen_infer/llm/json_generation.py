"""The generator in index builds (group summaries, the semantic tree).

``stage_generator`` builds the generator role from a stage's ``summarizer`` spec (None for the extractive one).
``generate_json`` asks it one prompt per item, each answer parsed by the caller's ``parse(item, text)``. Items whose
answer does not parse, or was cut at ``max_tokens`` (JSON repair would close it and keep a summary cut mid-sentence),
are asked again with sampling (a greedy retry repeats itself, and the response cache would replay it); items that
fail every attempt come back as None, so the caller can take its explicit, counted fallback. Every answer not used
as asked is counted in ``generator.problems`` by kind, reported when the stage releases its generator and kept in
the stage's manifest."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace
from typing import Callable

from tqdm.auto import tqdm

from garen_infer.llm.ledger import answer_problems
from garen_infer.llm.permutation import answer_part
from garen_infer.llm.problems import CUT_AT_MAX_TOKENS, UNREADABLE
from garen_infer.llm.types import Chat

log = logging.getLogger(__name__)


def repaired_json(text: str):
    """``text`` parsed as JSON, repaired by json_repair if need be (valid JSON parses as json.loads would); None when
    even repair fails. Small models' answers often miss a bracket or a quote. A thought (``<think>...</think>``) is
    not the answer: what follows it is read, and a thought that never closed leaves nothing."""
    import json_repair

    text, thought = answer_part(text, ranking=False)
    if thought:
        return None
    try:
        return json_repair.loads(text)
    except Exception:  # noqa: BLE001 - json_repair raises assorted errors on hopeless input
        return None


def stage_generator(spec: dict, folder, doc_texts: list[str]):
    """The generator role for an index stage's ``spec``, or None for ``{"backend": "extractive"}``."""
    if spec.get("backend", "extractive") == "extractive":
        return None
    from garen_infer.llm.cache import ResponseCache
    from garen_infer.llm.roles import build_roles

    return build_roles({"generator": spec}, doc_texts, folder, ResponseCache()).generator


def release_stage_generator(generator, stage: str) -> dict:
    """Once a stage is done with its generator: the prompts the model had to cut, reported once and returned for the
    manifest, and the model freed (its GPU memory too) before the next stage loads its own."""
    if generator is None:
        return {}
    cut = generator.backend.truncated_prompts
    if cut:
        log.warning("%s: %d prompts were cut in the middle to fit the summarizer's limit; raise its max_model_len or "
                    "max_length, or show fewer words per document", stage, cut)
    problems = dict(sorted(getattr(generator, "problems", {}).items()))
    if problems:
        log.warning("%s: summarizer answers not used as asked (each asked again, then the counted fallback): %s%s", stage,
                    ", ".join(f"{kind} {n}" for kind, n in problems.items()),
                    "; raise its sampling.max_tokens" if CUT_AT_MAX_TOKENS in problems else "")
    generator.backend.close()
    return {"truncated_prompts": cut, "answer_problems": problems}


def generate_json(generator, chats: list[Chat], parse: Callable[[int, str], object], retries: int, batch_size: int = 32,
                  what: str = "prompts", progress: bool = True) -> list:
    results: list = [None] * len(chats)
    counts = getattr(generator, "problems", Counter())  # LLMGenerator's, reported when the stage releases it
    with tqdm(total=len(chats), desc=what, unit="prompt", disable=not progress or len(chats) < 2) as bar:
        for start in range(0, len(chats), batch_size):
            pending = list(range(start, min(start + batch_size, len(chats))))
            for attempt in range(retries + 1):
                if not pending:
                    break
                sampling = generator.sampling if attempt == 0 else replace(generator.sampling, temperature=0.7, seed=attempt)
                completions = generator.backend.generate([chats[i] for i in pending], sampling)
                for i, completion in zip(pending, completions):
                    results[i] = _read(completion, lambda text: parse(i, text), counts)
                pending = [i for i in pending if results[i] is None]
            bar.update(min(batch_size, len(chats) - start))
    return results


def _read(completion, parse: Callable[[str], object], problems) -> object:
    """The parsed answer, or None when it does not parse or was cut at max_tokens; its problems are counted."""
    kinds = answer_problems(completion)
    parsed = None if CUT_AT_MAX_TOKENS in kinds else parse(completion.text)
    if parsed is None and CUT_AT_MAX_TOKENS not in kinds:
        kinds.append(UNREADABLE)
    problems.update(kinds)
    return parsed
