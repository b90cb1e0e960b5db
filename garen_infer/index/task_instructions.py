"""The task instruction an instruction-following embedder puts before each query (``{instruction}`` in an
embedding stage's ``query_prompt``): BRIGHT's per-task instructions as ReasonIR's evaluation configs word them
(the long-document tasks retrieve "documents"), and a generic one for any other corpus."""

from __future__ import annotations

GENERIC = "Given a query, retrieve relevant passages that answer the query"

_POSTS = {"biology": "Biology", "earth_science": "Earth Science", "economics": "Economics",
          "psychology": "Psychology", "robotics": "Robotics", "stackoverflow": "Stackoverflow",
          "sustainable_living": "Sustainable Living"}
BRIGHT = {
    **{task: f"Given a {name} post, retrieve relevant passages that help answer the post"
       for task, name in _POSTS.items()},
    "pony": "Given a Pony question, retrieve relevant passages that help answer the question",
    "leetcode": "Given a coding problem, retrieve relevant examples that help answer the problem",
    "aops": "Given a Math problem, retrieve relevant examples that help answer the problem",
    "theoremqa_questions": "Given a Math problem, retrieve relevant examples that help answer the problem",
    "theoremqa_theorems": "Given a Math problem, retrieve relevant theorems that help answer the problem",
}


def task_instruction(corpus_name: str) -> str:
    """``bright/<task>[:long]`` -> that task's instruction; any other corpus -> ``GENERIC``."""
    if not corpus_name.startswith("bright/"):
        return GENERIC
    task, _, variant = corpus_name.removeprefix("bright/").partition(":")
    instruction = BRIGHT.get(task, GENERIC)
    return instruction.replace("passages", "documents") if variant == "long" else instruction
