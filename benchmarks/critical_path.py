"""The dependent chains of a measured run on the stand-in engines, and the share of the capacity a client could
reach given them: how "bounded by dependency" becomes a figure.

Input: every sequence the engines answered (``Engine.sequences()``: engine, work, start, end, prompt), put into
chains one of two ways:

- **by query** (a method's run): a sequence belongs to the query whose text its prompt holds (the longest such
  text); a query's sequences, in the order they reached the engine, fall into *steps*: a sequence that starts
  after every earlier sequence of its query was answered begins a new step (it waited for them), one that starts
  before joins the current step (asked with it). Step k + 1 depends on the whole of step k.
- **by answer** (LATTICE's top-down clustering, which has no query): a sequence depends on the sequence of the
  same stream answered last before it started, if that answer came at most ``gap`` seconds before (a node is
  asked the moment its parent's partition is in); otherwise it is a root.

Figures, per engine:

- **least** time of a sequence: its work at ``capacity / saturation``, the most one request alone gets;
- **chain**: the longest dependent chain, the sum over one query's steps of each step's slowest least time
  (by answer: along the parents): below it no client can bring the span, however many lanes it has;
- **chain in the run**: the same query's steps as the run measured them, each from its first sequence's start
  to its last's answer: the chain's latencies under the run's load;
- **replay span**: the span of a client that costs nothing and sends each sequence the moment what it depends on
  is answered, every query at once and no limit on requests in flight, on the same engines (their capacity
  shared by the sequences in flight, at most ``capacity / saturation`` each): what the dependencies alone leave,
  the engines' other work included (GAREN's navigator waits for the reranker's windows);
- **reachable** = bound / replay span: the share of the capacity a client can use; the run's ``used`` is
  measured against it.

A yes/no slate sent as two calls that do not overlap reads as two steps: the chain then counts both, each a few
hundredths of a second; windows go one to a lane and are not split.
"""

from __future__ import annotations

import bisect
import heapq
import re
from collections import defaultdict
from dataclasses import dataclass, field

GAP_S = 0.5  # by answer: a request asked longer than this after the last answer is taken for a root


@dataclass
class Node:
    engine: str
    work: float  # 0: a step's barrier, done the moment its inputs are
    children: list[int] = field(default_factory=list)
    waiting: int = 0  # inputs not answered yet


def query_of(prompts: list[str], queries: list[str]) -> list[int | None]:
    """Each prompt's query: the position of the longest query text it holds (None: none)."""
    ordered = sorted({q for q in queries if q.strip()}, key=len, reverse=True)
    if not ordered:
        return [None] * len(prompts)
    position = {q: queries.index(q) for q in ordered}
    pattern = re.compile("|".join(map(re.escape, ordered)))
    found = [pattern.search(p) for p in prompts]
    return [position[m.group(0)] if m else None for m in found]


def steps_of(sequences: list[dict]) -> list[list[dict]]:
    """One query's sequences in steps: a new step starts with a sequence that starts after every earlier one ended."""
    steps: list[list[dict]] = []
    answered = float("-inf")
    for s in sorted(sequences, key=lambda s: s["start"]):
        if not steps or s["start"] >= answered:
            steps.append([])
        steps[-1].append(s)
        answered = max(answered, s["end"])
    return steps


def parents_by_answer(sequences: list[dict], gap: float = GAP_S) -> list[int | None]:
    """For each sequence (in the given order), the one answered last before it started, within ``gap`` seconds."""
    by_end = sorted(range(len(sequences)), key=lambda i: sequences[i]["end"])
    ends = [sequences[i]["end"] for i in by_end]
    parents: list[int | None] = []
    for s in sequences:
        last = bisect.bisect_right(ends, s["start"]) - 1
        parents.append(by_end[last] if last >= 0 and s["start"] - ends[last] <= gap else None)
    return parents


class Graph:
    """Sequences and the barriers between a query's steps."""

    def __init__(self):
        self.nodes: list[Node] = []

    def add(self, engine: str, work: float, after: list[int]) -> int:
        self.nodes.append(Node(engine, work, waiting=len(after)))
        for parent in after:
            self.nodes[parent].children.append(len(self.nodes) - 1)
        return len(self.nodes) - 1


class _Replay:
    """Processor sharing per engine: every sequence in flight on an engine advances at the same rate, ``capacity``
    shared by them and at most ``capacity / saturation`` each; ``virtual`` is the work each has had so far."""

    def __init__(self, graph: Graph, capacity: float, saturation: int):
        self.graph, self.capacity, self.cap = graph, capacity, capacity / saturation
        self.virtual: dict[str, float] = defaultdict(float)
        self.flight: dict[str, list] = defaultdict(list)  # per engine: heap of (virtual time it is done at, node)
        self.span: dict[str, list[float]] = {}
        self.now = 0.0

    def release(self, node_id: int) -> None:
        """Send a node whose inputs are answered (a barrier passes at once to what waits on it)."""
        stack = [node_id]
        while stack:
            node = self.graph.nodes[stack.pop()]
            if node.work > 0:
                heapq.heappush(self.flight[node.engine], (self.virtual[node.engine] + node.work, id(node), node))
                self.span.setdefault(node.engine, [self.now, self.now])
            else:
                stack += self._answered(node)

    def _answered(self, node: Node) -> list[int]:
        """The children of an answered node that now have all of their inputs."""
        ready = []
        for child in node.children:
            self.graph.nodes[child].waiting -= 1
            if not self.graph.nodes[child].waiting:
                ready.append(child)
        return ready

    def step(self) -> None:
        """Advance the clock to the next answer, and send what it releases."""
        rate = {e: min(self.capacity / len(h), self.cap) for e, h in self.flight.items() if h}
        engine, wait = min(((e, (self.flight[e][0][0] - self.virtual[e]) / r) for e, r in rate.items()),
                           key=lambda x: x[1])
        self.now += wait
        for e, r in rate.items():
            self.virtual[e] += r * wait
        heap = self.flight[engine]
        while heap and heap[0][0] <= self.virtual[engine] + 1e-9:
            for child in self._answered(heapq.heappop(heap)[2]):
                self.release(child)
        self.span[engine][1] = self.now


def replay(graph: Graph, capacity: float, saturation: int) -> dict[str, tuple[float, float]]:
    """Each engine's (first start, last answer) when every node is sent the moment its inputs are answered."""
    run = _Replay(graph, capacity, saturation)
    for i, node in enumerate(graph.nodes):
        if not node.waiting:
            run.release(i)
    while any(run.flight.values()):
        run.step()
    return {e: (a, b) for e, (a, b) in run.span.items()}


def by_query(sequences: list[dict], queries: list[str], capacity: float, saturation: int) -> dict:
    """The figures of a method's run (``sequences`` of every engine, each with its ``engine``)."""
    cap = capacity / saturation
    owners = query_of([s["prompt"] for s in sequences], queries)
    per_query: dict[int, list[dict]] = defaultdict(list)
    for s, q in zip(sequences, owners):
        if q is not None:
            per_query[q].append(s)
    graph, chains = Graph(), defaultdict(list)  # chains[engine]: (least chain, chain in the run) per query
    for mine in per_query.values():
        before: list[int] = []
        steps = steps_of(mine)
        for step in steps:
            ids = [graph.add(s["engine"], s["work"], before) for s in step]
            before = [graph.add("", 0.0, ids)]
        for engine in {s["engine"] for s in mine}:
            chains[engine].append(_chain(steps, engine, cap))
    unowned = [s for s, q in zip(sequences, owners) if q is None]
    for s in unowned:  # no query found: a root of its own
        graph.add(s["engine"], s["work"], [])
    return _figures(graph, chains, capacity, saturation, len(unowned))


def _chain(steps: list[list[dict]], engine: str, cap: float) -> tuple[float, float]:
    """A query's chain from its first step holding ``engine`` to its last: (least time, time in the run)."""
    held = [k for k, step in enumerate(steps) if any(s["engine"] == engine for s in step)]
    kept = steps[held[0] : held[-1] + 1]
    least = sum(max(s["work"] for s in step) / cap for step in kept)
    measured = sum(max(s["end"] for s in step) - min(s["start"] for s in step) for step in kept)
    return least, measured


def by_answer(sequences: list[dict], capacity: float, saturation: int, gap: float = GAP_S) -> dict:
    """The figures of a stream whose requests each wait for the answer before them (LATTICE's clustering)."""
    cap = capacity / saturation
    ordered = sorted(sequences, key=lambda s: s["start"])
    parents = parents_by_answer(ordered, gap)
    graph, least, measured = Graph(), [0.0] * len(ordered), [0.0] * len(ordered)
    for i, (s, parent) in enumerate(zip(ordered, parents)):
        graph.add(s["engine"], s["work"], [] if parent is None else [parent])
        least[i] = s["work"] / cap + (least[parent] if parent is not None else 0.0)
        measured[i] = s["end"] - s["start"] + (measured[parent] if parent is not None else 0.0)
    chains = defaultdict(list)
    for s, a, b in zip(ordered, least, measured):
        chains[s["engine"]].append((a, b))
    return _figures(graph, chains, capacity, saturation, 0)


def _figures(graph: Graph, chains: dict, capacity: float, saturation: int, unowned: int) -> dict:
    work = defaultdict(float)
    for node in graph.nodes:
        work[node.engine] += node.work
    spans = replay(graph, capacity, saturation)
    out = {}
    for engine, (first, last) in spans.items():
        least, measured = max(chains.get(engine) or [(0.0, 0.0)])
        bound = work[engine] / capacity
        out[engine] = {"chain_s": round(least, 2), "chain_run_s": round(measured, 2),
                       "replay_s": round(last - first, 2),
                       "reachable": round(bound / (last - first), 3) if last > first else 1.0,
                       "unowned": unowned}
    return out
