"""``garen-infer``: index a corpus, run a method, evaluate a run, or see the embedded demo."""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import nullcontext
from pathlib import Path

from garen_infer.configuration.presets import load_preset, run_config_from
from garen_infer.errors import GarenError, storage_refusal
from garen_infer.storage.writer_lock import writer_lock


def _common(parser: argparse.ArgumentParser, dataset_required: bool = True) -> None:
    parser.add_argument("--dataset", required=dataset_required,
                        help="beir:<folder>[:split] | bright:<task>[:long][@source][@revision] | "
                             "jsonl:<corpus>[,<queries>[,<qrels>]] | irds:<id> | stdlib-docs. JSONL lines: corpus "
                             "{\"id\", \"text\", \"title\" (optional)}, queries {\"id\", \"text\", \"excluded_ids\" "
                             "(optional)}; qrels: TSV query-id corpus-id score (docs/running.md, Datasets)")
    parser.add_argument("--preset", default="cpu-default",
                        help="a name in configs/ or a YAML path (default: cpu-default)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a preset field, e.g. methods.garen.tau_switch=2")
    parser.add_argument("--allow-empty-docs", action="store_true",
                        help="keep documents with neither title nor text (Cranfield has two)")


def at_least(low: int):
    """An argparse type: integers >= ``low``, refused before anything starts."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low or str(value) != text.strip().lstrip("+"):
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got '{text}'")
        return value

    return parse


at_least_one = at_least(1)  # budgets, limits and counts


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line, like every other refusal (the usage itself is one --help away)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="garen-infer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    index = sub.add_parser("index", help="build (or complete) an index folder")
    _common(index, dataset_required=False)
    index.add_argument("--out", required=True, help="index folder")
    index.add_argument("--force", action="store_true", help="rebuild every stage even if the manifest says it is built")
    mode = index.add_mutually_exclusive_group()
    mode.add_argument("--verify", action="store_true", help="build nothing: read every file of the index "
                      "and compare it with the digest its manifest records (with --dataset, the corpus too)")
    mode.add_argument("--shard-prefix", action="store_true", help="build only the stages that ask no "
                      "generator model and read none that does: what the --shard I/N jobs read, built once")
    mode.add_argument("--shard", metavar="I/N", help="answer only shard I of N of the model prompts of the "
                      "stages that shard (group summaries, top-down document summaries) into OUT/shards/, "
                      "reading the stages --shard-prefix built; resumable; join them with --merge-shards")
    mode.add_argument("--merge-shards", action="store_true", help="build the index, the sharded stages from "
                      "the answers of their finished shards (every shard 1..N, none missing)")
    index.add_argument("--json", action="store_true",
                       help="print what was built as JSON (each stage's action, seconds, "
                       "bytes and manifest entry) instead of the table")

    run = sub.add_parser("run", help="run a method and write run.trec, metrics.json and trace.jsonl")
    _common(run)
    run.add_argument("--index", required=True)
    run.add_argument("--method", required=True)
    run.add_argument("--budget", type=at_least_one, help="distinct documents the reranker may see (Reranker@k)")
    run.add_argument("--out", required=True, help="run folder (resumable)")
    run.add_argument("--limit", type=at_least_one, help="only the first N judged queries")
    run.add_argument("--cache",
                     help="response cache file (default ~/.cache/garen/responses.sqlite, or $GAREN_CACHE_DIR)")
    run.add_argument("--no-cache", action="store_true")
    run.add_argument("--max-active-queries", type=at_least_one, help="queries in flight at once (1 = one at a time)")
    run.add_argument("--shard",
                     help="I/N: only shard I of N of the judged queries (a split by query id; merge the "
                     "shards with 'garen-infer merge')")
    run.add_argument("--seeds", type=at_least_one, default=1,
                     help="runs with sampling seeds 0..N-1 under OUT/seed-K, and their mean (GAREN sec. 5: 5)")

    ev = sub.add_parser("eval", help="score any TREC run file")
    _common(ev)
    ev.add_argument("--run", required=True)
    ev.add_argument("--measures", nargs="+", default=["nDCG@10", "R@100"],
                    help="ir_measures or trec_eval names, e.g. nDCG@10 R@100 AP RR@10, or ndcg_cut_10 recall_100 map")
    ev.add_argument("--judged-in-run", action="store_true",
                    help="average over the judged queries the run answers (trec_eval without -c), "
                    "not over all judged queries with the missing ones scoring 0 (trec_eval -c, ir_measures, "
                    "pt.Experiment)")
    ev.add_argument("-q", "--per-query", action="store_true", help="each query's values too, as trec_eval -q: "
                    "rows before the 'all' rows with --format trec_eval, a \"per_query\" object {qid: "
                    "{measure: value}} in JSON")
    ev.add_argument("--format", choices=("json", "trec_eval"), default="json",
                    help="json (default): the means and the coverage as one JSON object; trec_eval: trec_eval's lines "
                         "'measure<TAB>qid<TAB>value', its measure names (ndcg_cut_10, recall_100, map) and 4 places")

    bench = sub.add_parser("bench",
                           help="run a methods x budgets x datasets matrix (resumable) and write a comparison report")
    bench.add_argument("--config", required=True, help="a bench file (see configs/bench/)")
    bench.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a bench file field, e.g. budgets=[100]")
    bench.add_argument("--limit", type=at_least_one, metavar="N",
                       help="only the first N judged queries of each dataset: a smoke run kept apart from the full "
                            "bench: run folders ending .firstN, and the report in <report>.firstN beside the bench "
                            "file's report, which is left as it is (the first line printed names both)")
    bench.add_argument("--cache",
                       help="response cache file (default ~/.cache/garen/responses.sqlite, or $GAREN_CACHE_DIR)")
    bench.add_argument("--no-cache", action="store_true")
    jobs = bench.add_mutually_exclusive_group()
    jobs.add_argument("--plan", nargs="?", const="commands", choices=("commands", "slurm"),
                      help="print one command per cell (or, with 'slurm', an array job script) and run no cell "
                           "(with build_index: true it builds the missing indexes first, so cells only read them)")
    bench.add_argument("--env", metavar="PREFIX",
                       help="with --plan slurm: the virtualenv or conda prefix the jobs activate "
                       "(default: the one planning them)")
    jobs.add_argument("--cell", type=at_least_one, metavar="K", help="run cell K of --plan alone (no report)")
    jobs.add_argument("--collect", action="store_true", help="run nothing: write the report from the finished cells")

    merge = sub.add_parser("merge",
                           help="join the run folders of 'run --shard I/N' into the folder an unsharded run writes")
    merge.add_argument("shards", nargs="+", metavar="SHARD", help="the shards' run folders")
    merge.add_argument("--out", required=True, help="the merged run folder")
    merge.add_argument("--dataset", required=True,
                       help="the dataset the shards ran on (for its queries and judgements)")
    merge.add_argument("--allow-empty-docs", action="store_true")
    merge.add_argument("--partial", action="store_true", help="merge the shards there are, into a run labelled partial")

    cache = sub.add_parser("cache", help="response cache files: 'cache merge' joins the caches of separate processes")
    cache_sub = cache.add_subparsers(dest="action", required=True)
    cache_merge = cache_sub.add_parser("merge",
                                       help="add the answers of CACHE... to --out (a key already there keeps "
                                       "its answer)")
    cache_merge.add_argument("sources", nargs="+", metavar="CACHE", help="cache files, e.g. one per shard")
    cache_merge.add_argument("--out", required=True, help="the cache file to merge into (created if need be)")

    compare = sub.add_parser("compare",
                             help="two runs query by query: wins, losses, ties, paired t-test and randomisation test")
    compare.add_argument("run_a", help="a finished run folder, or a TREC run file from any system")
    compare.add_argument("run_b", help="another run folder or TREC run file on the same dataset")
    compare.add_argument("--dataset", required=True, help="the dataset both runs used (for its judgements)")
    compare.add_argument("--allow-empty-docs", action="store_true",
                         help="accepted as run takes it; scoring reads no documents")
    compare.add_argument("--measures", nargs="+", default=["nDCG@10", "R@100"],
                         help="ir_measures or trec_eval names, e.g. nDCG@10 R@100 AP RR@10, or ndcg_cut_10 "
                         "recall_100 map")
    compare.add_argument("--permutations", type=at_least_one, default=10_000,
                         help="sign flips of the randomisation test")
    compare.add_argument("--seed", type=int, default=0)
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    options = sub.add_parser("options", help="a method's options (or the preset's run or first_stage "
                             "section, or a model backend's settings): each one's type, default, paper "
                             "source and meaning")
    options.add_argument("name", metavar="METHOD",
                         help="a method's name, or run, or first_stage, or a backend (openai, vllm, ...)")
    options.add_argument("--json", action="store_true", help="print them as JSON")
    tree = sub.add_parser("tree", help="print the outline of an index's semantic tree (LATTICE)")
    tree.add_argument("--index", required=True)
    tree.add_argument("--depth", type=at_least(0), default=2, help="levels below the root to show (default 2)")
    tree.add_argument("--stage", default="semantic_tree", help="the index stage holding the tree")

    sub.add_parser("presets", help="list the presets, bench files and training jobs this install ships")

    demo = sub.add_parser("demo", help="the embedded default: index the Python stdlib docs and answer a few questions")
    demo.add_argument("--out", default=None,
                      help="where to keep the demo index and run (default ~/.cache/garen/demo-<hash of this install>)")
    demo.add_argument("--method", default="garen")
    return parser


def cmd_index(args) -> int:
    from garen_infer.data import load_dataset
    from garen_infer.index.build_summary import summary, summary_table
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig

    if args.verify:
        folder = IndexFolder.open(args.out, load_dataset(args.dataset, args.allow_empty_docs) if args.dataset else None)
        checked = folder.verify()
        print(f"{folder.path}: {checked} file(s) match the digests of manifest.json")
        return 0
    if not args.dataset:
        raise GarenError("the following arguments are required: --dataset (only 'index --verify' reads no dataset)")
    shard = _index_shard(args)  # refused before the data loads
    preset = load_preset(args.preset, args.overrides)
    config = IndexConfig.from_dict(preset.get("index", {}))
    dataset = load_dataset(args.dataset, args.allow_empty_docs)

    def log(line: str) -> None:  # stdout: the summary or --json
        print(line, file=sys.stderr)

    if shard is not None:
        done = IndexFolder.build_shard(dataset, args.out, config, (shard.index, shard.count), log=log)
        lines = [f"{d['stage']}: shard {d['shard']}, {d['prompts']} {d['of']}, in {d['folder']}"
                 for d in done]
        print(json.dumps(done, indent=2) if args.json else
              "\n".join(lines) or "nothing to shard: the sharded stages are built")
        return 0
    if args.shard_prefix:
        from garen_infer.index.stages import model_free

        config = IndexConfig(model_free(config.stages))
    folder = IndexFolder.build(dataset, args.out, config, force=args.force, log=log,
                               merge_shards=args.merge_shards)
    facts = summary(folder)
    print(json.dumps(facts, indent=2) if args.json else summary_table(facts))
    return 0


def _index_shard(args):
    """``index --shard I/N``'s shard, or None; one line for a bad value or a flag it cannot take."""
    from garen_infer.configuration.shards import parse_shard

    if args.shard is None:
        return None
    if args.force:
        raise GarenError("--shard with --force: a shard rebuilds nothing; rebuild the stages it reads with "
                         "'garen-infer index --shard-prefix --force', then run the shards")
    return parse_shard(args.shard)


def cmd_run(args) -> int:
    from garen_infer.data import load_dataset
    from garen_infer.index.folder import IndexFolder
    from garen_infer.llm.cache import NoCache, ResponseCache
    from garen_infer.running.session import Session

    preset = load_preset(args.preset, args.overrides)
    # checked before the data loads
    config = run_config_from(preset, args.method, args.budget, args.limit, args.max_active_queries,
                             args.shard)
    if args.shard and args.seeds > 1:
        raise GarenError("--shard with --seeds: run each seed as its own sharded run (--set "
                         "models.<role>.sampling.seed=K)")
    dataset = load_dataset(args.dataset, args.allow_empty_docs)
    index = IndexFolder.open(args.index, dataset)
    cache = NoCache() if args.no_cache else ResponseCache(args.cache)
    if args.seeds > 1:
        from garen_infer.running.repeat import run_seeds

        metrics = run_seeds(dataset, index, config, args.out, args.seeds, cache=cache)
    else:
        metrics = Session(dataset, index, config, cache).run(args.out)
    print(json.dumps(metrics, indent=2))
    if "simulation" in metrics:  # repeated under the numbers, where a reader's eye lands
        from garen_infer.llm.oracle import banner

        print(banner(metrics["simulation"]), file=sys.stderr)
    return 0


def cmd_eval(args) -> int:
    from garen_infer.data import load_judgments
    from garen_infer.evaluation.evaluate import (
        averaging_line,
        by_query,
        coverage,
        means,
        measure_names,
        scored_queries,
        trec_eval_text,
    )
    from garen_infer.llm.oracle import NOTICE, RUN_TAG
    from garen_infer.storage.trec import read_run, read_tag

    measures = measure_names(args.measures)  # a typo is refused before the data loads
    dataset = load_judgments(args.dataset)  # queries and judgements: a run is scored without the corpus
    run = read_run(args.run)
    covered = coverage(run, dataset)
    values = scored_queries(run, dataset, measures, judged_in_run=args.judged_in_run)
    simulated = read_tag(args.run).endswith(RUN_TAG)
    if args.format == "trec_eval":
        print(trec_eval_text(values, args.per_query), end="")
        if simulated:  # no JSON field to carry it: said beside the numbers
            print(f"garen-infer eval: {NOTICE}", file=sys.stderr)
    else:
        result = {**means(values), **covered, "mean_over": "judged_in_run" if args.judged_in_run else "all_judged",
                  **({"per_query": by_query(values)} if args.per_query else {})}
        print(json.dumps({"simulation": NOTICE, **result} if simulated else result, indent=2))
    # which queries the means are over, every time: an 8-query run averaged over 300 judged ones must not pass unnoticed
    print(f"garen-infer eval: {averaging_line(covered, dataset.name, args.run, args.judged_in_run)}", file=sys.stderr)
    return 0


def arguments(cls, args: argparse.Namespace):
    """The typed arguments ``cls`` (a dataclass) of a command, from what argparse parsed."""
    from dataclasses import fields

    return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})


def cmd_bench(args) -> int:
    from garen_infer.report.bench import BenchArguments, main

    return main(arguments(BenchArguments, args))


def cmd_merge(args) -> int:
    from garen_infer.data import load_dataset
    from garen_infer.running.merge import merge_runs

    metrics = merge_runs(load_dataset(args.dataset, args.allow_empty_docs), args.shards, args.out, args.partial)
    print(json.dumps(metrics, indent=2))
    return 0


def cmd_cache(args) -> int:
    from garen_infer.llm.cache_merge import merge_caches

    count = merge_caches(args.out, args.sources)
    print(
        f"[cache] {args.out}: {count.added} answers added, {count.present} already there"
        + (
            f", {count.differing} already there with another answer (kept; the models were sampled)"
            if count.differing
            else ""
        )
    )
    return 0


def cmd_compare(args) -> int:
    from garen_infer.report.compare import CompareArguments, main

    return main(arguments(CompareArguments, args))


def cmd_options(args) -> int:
    from dataclasses import asdict

    from garen_infer.configuration.option_docs import documented_options, options_text

    if args.json:
        print(json.dumps([asdict(doc) for doc in documented_options(args.name)], indent=2, default=repr))
    else:
        print(options_text(args.name), end="")
    return 0


def cmd_tree(args) -> int:
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.tree.semantic_tree import SemanticTree

    index = IndexFolder.open(args.index)
    index.require(args.stage, "printing a tree")
    tree = SemanticTree.load(index.path / args.stage, index.row_of_id)
    try:
        print(tree.outline(index.doc_ids, args.depth))
    except BrokenPipeError:  # `garen-infer tree ... | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def cmd_presets(args) -> int:
    from garen_infer.configuration.presets import CONFIG_DIR, shipped_configs

    print(f"Shipped with garen-ir, in {CONFIG_DIR}:")
    for kind, files in shipped_configs().items():
        print(f"\n{kind}:")
        width = max((len(name) for name, _ in files), default=0)
        for name, about in files:
            print(f"  {name:<{width}}  {about}")
    return 0


def cmd_demo(args) -> int:
    from garen_infer.doors.demo import run_demo

    out = Path(args.out) if args.out else None
    return run_demo(out, args.method)


# commands that write the folder named by --out
WRITES = {"index": "index folder", "run": "run folder", "merge": "run folder"}


INTERRUPTED = (
    "interrupted; what was finished is kept and nothing half-written is: run the same command again to "
    "continue"
)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    commands = {"index": cmd_index, "run": cmd_run, "eval": cmd_eval, "bench": cmd_bench, "compare": cmd_compare,
                "merge": cmd_merge, "cache": cmd_cache, "options": cmd_options, "tree": cmd_tree,
                "presets": cmd_presets, "demo": cmd_demo}
    command = commands[args.command]
    try:
        # a shard writes only its own folder under OUT/shards/ (locked there): N shards run at once
        writes = (args.command in WRITES and not getattr(args, "verify", False)
                  and not getattr(args, "shard", None))
        with writer_lock(args.out, WRITES[args.command]) if writes else nullcontext():
            return command(args)  # a second writer of the folder is refused before any data loads
    except GarenError as err:
        print(f"garen-infer {args.command}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        refusal = storage_refusal(err)
        if refusal is None:
            raise
        print(f"garen-infer {args.command}: error: {refusal}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # outside a query loop (index stages, start-up): every output is renamed when complete
        print(f"garen-infer {args.command}: {INTERRUPTED}", file=sys.stderr)
        return 130
