"""Scripted generators for LATTICE's top-down tree, whose answers are a function of the prompt and the sampling
alone (as a greedy model's are), and the per-depth build order the tree must not depend on.

- ``ScriptedTreeBackend`` answers like a tidy LLM over the tiny corpus (``broken``: nonsense);
- ``MessyTreeBackend`` over ``synthetic_corpus``: some answers unreadable until a sampled retry, some never
  readable (extractive levels, k-means nodes), some clusterings that leave keys out (nearest centroid);
- ``Lanes`` puts a backend behind a server's slots and delays each prompt by its own hash, so answers arrive out
  of the order they were asked;
- ``per_depth_build``: every oversized node of a depth asked in one call, the next depth after the slowest answer.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from conftest import DOCS

from garen_infer.index.tree.semantic_tree import BuiltNode
from garen_infer.llm.types import Completion, SamplingParams

TOPIC = {d: re.sub(r"\d", "", d) for d, _, _ in DOCS}
TEXT_TO_DOC = {" ".join(f"{t}\n{x}".split()): d for d, t, x in DOCS}
_KEY = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)


def digest(text: str) -> float:
    """A number in [0, 1) drawn from ``text``."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16) / 16**12


def document_of(prompt: str) -> str:
    return prompt.split("Document:\n", 1)[1].split("\n\nReply", 1)[0]


def clusters_json(groups: list[list[int]]) -> str:
    return json.dumps({"clusters": [{"name": f"group {g}", "description": f"keys {members}", "members": members}
                                    for g, members in enumerate(groups)]})


@dataclass
class ScriptedTreeBackend:
    """Answers the two construction prompts like a tidy LLM: level summaries by topic, clusters by topic (or halves
    when the keys share one topic). ``broken`` answers nonsense instead."""

    broken: bool = False
    id: str = "scripted-llm"

    def generate(self, chats, params):
        return [Completion(text="no idea" if self.broken else self.answer(chat[-1]["content"])) for chat in chats]

    @staticmethod
    def answer(prompt: str) -> str:
        if "levels of detail" in prompt:
            doc = TEXT_TO_DOC[document_of(prompt)]
            topic = TOPIC[doc]
            return json.dumps({"levels": ["science", topic, f"{topic} topics", f"{topic} subtopics",
                                          f"{doc} specifics"]})
        keys = _KEY.findall(prompt)
        by_topic: dict[str, list[int]] = {}
        for i, key in keys:
            by_topic.setdefault(re.sub(r"\d", "", key.split()[0]), []).append(int(i))
        groups = list(by_topic.values())
        if len(groups) == 1:
            half = len(groups[0]) // 2
            groups = [groups[0][:half], groups[0][half:]]
        return clusters_json(groups)


@dataclass
class ScriptedGenerator:
    backend: object
    sampling: SamplingParams = SamplingParams()
    name: str = "scripted-llm"
    problems: Counter = field(default_factory=Counter)  # answers not used as asked, as LLMGenerator counts them


def synthetic_corpus(n: int = 240, seed: int = 7) -> tuple[list[str], np.ndarray]:
    """``n`` documents on a three-level topic hierarchy (4 x 3 x 4 topics) and vectors that follow it."""
    rng = np.random.default_rng(seed)
    field_at, branch_at, leaf_at = rng.normal(size=(4, 16)), rng.normal(size=(4, 3, 16)), rng.normal(size=(4, 3, 4, 16))
    texts, vectors = [], []
    for i in range(n):
        a, b, c = int(rng.integers(4)), int(rng.integers(3)), int(rng.integers(4))
        texts.append(f"doc{i} concerns field{a} branch{a}x{b} leaf{a}x{b}x{c} with note{i % 5} and tail{i % 3}.")
        vectors.append(3 * field_at[a] + 2 * branch_at[a, b] + leaf_at[a, b, c] + 0.5 * rng.normal(size=16))
    out = np.asarray(vectors, np.float32)
    return texts, out / np.linalg.norm(out, axis=1, keepdims=True)


@dataclass
class MessyTreeBackend:
    """Answers over ``synthetic_corpus`` the way a small model does: a greedy answer unreadable for some prompts (a
    sampled retry reads), never readable for others, and clusterings that leave keys out or do not split."""

    id: str = "messy-llm"

    def generate(self, chats, params: SamplingParams):
        return [Completion(text=self.answer(chat[-1]["content"], params.temperature > 0)) for chat in chats]

    @staticmethod
    def answer(prompt: str, sampled: bool) -> str:
        luck = digest(prompt)
        if "levels of detail" in prompt:
            words = document_of(prompt).split()
            doc = int(words[0][3:])
            if doc % 23 == 0 or (doc % 11 == 0 and not sampled):
                return "I would describe it as follows: {levels"
            return json.dumps({"levels": [words[2], f"{words[2]} {words[3]}", f"{words[3]} {words[4]}",
                                          f"{words[4]} {words[6]}", f"{words[4]} {words[6]} {words[0]}"]})
        if luck < 0.12 and not sampled:
            return '{"clusters": [{"name": "a", "members": ['  # cut off: repaired, no usable cluster
        keys = [(int(i), key.split()) for i, key in _KEY.findall(prompt)]
        high = int(re.search(r"between \d+ and (\d+) clusters", prompt).group(1))
        if luck < 0.2:  # one cluster: no partition however often it is asked
            return clusters_json([[i for i, _ in keys]])
        position = next((p for p in range(max(len(k) for _, k in keys))
                         if len({tuple(k[: p + 1]) for _, k in keys}) > 1), 0)
        by_word: dict[str, list[int]] = {}
        for i, key in keys:
            by_word.setdefault(" ".join(key[: position + 1]), []).append(i)
        groups = list(by_word.values())
        while len(groups) > high:  # the two smallest merged
            groups.sort(key=len)
            groups = [groups[0] + groups[1]] + groups[2:]
        larger = [g for g in groups if len(g) > 1]
        if luck < 0.4 and larger:  # a key left out of every cluster
            larger[-1].pop()
        return clusters_json(groups)


class Lanes:
    """``backend`` behind ``slots`` server slots; each prompt answered after a delay drawn from its text (up to
    ``most`` seconds), so answers return in another order than asked. Records the prompts as they come in."""

    def __init__(self, backend, slots: int = 8, most: float = 0.02):
        self.backend, self.requests_at_once, self.most = backend, slots, most
        self.id = backend.id
        self.received: list[tuple[str, float]] = []  # (prompt, temperature) as they came in
        self.answered: list[str] = []  # prompts as their answers went out
        self.lock = threading.Lock()

    def generate(self, chats, params):
        with self.lock:
            self.received += [(chat[-1]["content"], params.temperature) for chat in chats]
        time.sleep(self.most * digest("delay" + chats[0][-1]["content"]))
        answers = self.backend.generate(chats, params)
        with self.lock:
            self.answered += [chat[-1]["content"] for chat in chats]
        return answers


def per_depth_build(builder, prompts_by_depth: list | None = None) -> tuple[BuiltNode, list[list[str]]]:
    """``builder``'s tree in the per-depth order: every oversized node of a depth asked in one call
    (``generate_json``), each depth after the whole depth above is in. ``prompts_by_depth`` receives each depth's
    clustering prompts."""
    from garen_infer.index.tree.tree_top_down import parse_clusters
    from garen_infer.llm.json_generation import generate_json
    from garen_infer.llm.prompts import lattice_cluster

    levels = builder.document_levels()
    root = BuiltNode("", "root")
    queue = [(root, list(range(len(builder.texts))))]
    while queue:
        oversized = []
        for node, rows in queue:
            if len(rows) <= builder.p.max_children:
                node.children.extend(rows)
            else:
                oversized.append((node, rows))
        plans = [builder.choose_level(rows, levels) for _, rows in oversized]
        builder.stats.no_level_fits += sum(plan is None for plan in plans)
        asked = [(i, plan) for i, plan in enumerate(plans) if plan is not None]
        chats = [lattice_cluster(keys, builder.min_clusters, builder.p.max_children) for _, (_, keys) in asked]
        if prompts_by_depth is not None:
            prompts_by_depth.append([chat[-1]["content"] for chat in chats])
        answers = generate_json(builder.generator, chats, lambda j, text,
                                asked=asked: parse_clusters(text, len(asked[j][1][1]), builder.p.max_children),
                                builder.p.retries, builder.p.batch_size, progress=False)
        partitions: list = [None] * len(oversized)
        for (i, (level, keys)), answer in zip(asked, answers):
            if answer is not None:
                partitions[i] = builder.assign(oversized[i][1], level, keys, levels, answer)
        queue = []
        for (node, rows), clusters in zip(oversized, partitions):
            if clusters is None:
                builder.stats.partition_fallbacks += 1
                clusters = builder.kmeans_split(rows)
            for desc, source, members in clusters:
                if len(members) == 1:
                    node.children.append(members[0])
                    continue
                child = BuiltNode(desc, source)
                node.children.append(child)
                queue.append((child, members))
    return root, levels
