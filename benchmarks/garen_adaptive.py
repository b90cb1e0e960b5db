"""GAREN's switch rule, fixed (the paper's tau_switch) against adaptive (methods/garen_adaptive.py), navigator by
navigator, with the oracle reranker (a SIMULATION, llm/oracle.py) and with cpu-default's own MiniLM reranker.

For each dataset and each reranker (oracle at every ``--sigmas`` with uniform noise and correlated noise at every
``--correlations``, then cpu-default's cosine) it runs GAREN at one budget with every navigator x rule of the grid
(``--rules``: fixed, adaptive and sum-scores, the best rule of the previous release); with the first reranker it
also runs every variant tried (``--variant-rules``, RULES below) with the ``--variant-navigators``.
Navigators: ``minilm`` (cpu-default's cosine on the group summaries), ``connectivity`` (sec. 6.4, no model),
``best-member`` (no summary: max cosine between the query and a group's members, from the index's embeddings),
``minilm+best-member`` (the mean of the two),
``simulated`` (the oracle navigator at the reranker's sigma and noise) and, with ``--fitted``, a navigator export
(e.g. MiniLM fitted on ``garen-train mine --labels reranker`` pairs). It prints nDCG@10, R@100, the share of the
nDCG@10 gap (minilm fixed -> simulated fixed) each run recovers, the paired test of each rule against the same
navigator's fixed rule (randomisation test, garen_infer/report/significance.py), the mean navigator reliability
(Spearman rho, per query), the CPU milliseconds per query spent in the rule's own code (evidence bookkeeping,
which every rule records, + the adaptive ordering; no model call in either) and the wall seconds per query; and,
per reranker, how many of the gold documents the simulated navigator found and MiniLM fixed missed were within a
switch rule's reach.

    python benchmarks/garen_adaptive.py --dataset scifact=beir:DATA/scifact:test --index scifact=IDX/scifact \
        --dataset cranfield=beir:DATA/cranfield:test --index cranfield=IDX/cranfield --allow-empty-docs cranfield \
        --out runs/garen-adaptive --limit 100

Finished runs are re-read, not run again. Writes summary.json and summary.md to --out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MEASURES = ("nDCG@10", "R@100")
# name -> methods.garen options; adaptive and adaptive-scores are the options' defaults, the rest the variants
RULES = {
    "fixed": {}, "adaptive": {"switch_rule": "adaptive"}, "adaptive-scores": {"switch_rule": "adaptive-scores"},
    # the evidence added to the navigator's percentile, groups in the order of the sum (adaptive_merge: sum)
    "sum": {"switch_rule": "adaptive", "adaptive_merge": "sum"},
    "sum-scores": {"switch_rule": "adaptive-scores", "adaptive_merge": "sum"},
    "sum-l0.25": {"switch_rule": "adaptive", "adaptive_merge": "sum", "adaptive_prior_min": 0.25},
    "sum-scores-l1": {"switch_rule": "adaptive-scores", "adaptive_merge": "sum", "adaptive_prior_min": 1.0},  # = fixed
    "sum-lead": {"switch_rule": "adaptive", "adaptive_merge": "sum", "adaptive_reliability": "lead"},
    "sum-lead-scores": {"switch_rule": "adaptive-scores", "adaptive_merge": "sum", "adaptive_reliability": "lead"},
    "sum-auc": {"switch_rule": "adaptive", "adaptive_merge": "sum", "adaptive_reliability": "auc"},
    "sum-auc-scores": {"switch_rule": "adaptive-scores", "adaptive_merge": "sum", "adaptive_reliability": "auc"},
    "sum-auc2": {"switch_rule": "adaptive", "adaptive_merge": "sum", "adaptive_reliability": "auc",
                 "adaptive_power": 2.0},
    "sum-auc2-scores": {"switch_rule": "adaptive-scores", "adaptive_merge": "sum", "adaptive_reliability": "auc",
                        "adaptive_power": 2.0},
    # the navigator's order and the sum's interleaved (adaptive_merge: interleave, 1:1; interleave-2, 1:2)
    "interleave": {"switch_rule": "adaptive", "adaptive_merge": "interleave"},
    "interleave-scores": {"switch_rule": "adaptive-scores", "adaptive_merge": "interleave"},
    "interleave-auc-scores": {"switch_rule": "adaptive-scores", "adaptive_merge": "interleave",
                              "adaptive_reliability": "auc"},
    "interleave-l0": {"switch_rule": "adaptive-scores", "adaptive_merge": "interleave", "adaptive_prior_min": 0.0},
    "interleave2-l0": {"switch_rule": "adaptive-scores", "adaptive_merge": "interleave-2", "adaptive_prior_min": 0.0},
}
MAIN_RULES = ("fixed", "adaptive", "sum-scores")  # the grid; the other rules run as variants (--variant-rules)
NAVIGATORS = ("minilm", "connectivity", "best-member", "simulated", "fitted", "minilm+best-member")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", action="append", required=True, help="NAME=SPEC, repeatable")
    ap.add_argument("--index", action="append", required=True, help="NAME=FOLDER, one per dataset")
    ap.add_argument("--allow-empty-docs", nargs="*", default=[], help="the dataset NAMEs with empty documents")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sigmas", nargs="+", type=float, default=[0.3, 0.5])
    ap.add_argument("--correlations", nargs="+", type=float, default=[0.0, 0.5])
    ap.add_argument("--navigators", nargs="+", default=list(NAVIGATORS[:4]), choices=NAVIGATORS)
    ap.add_argument("--rules", nargs="+", default=list(MAIN_RULES), choices=list(RULES))
    ap.add_argument("--variant-rules", nargs="*", default=[r for r in RULES if r not in MAIN_RULES],
                    choices=list(RULES),
                    help="rules run only with the first reranker and the --variant-navigators (the variants tried)")
    ap.add_argument("--variant-navigators", nargs="*", default=["minilm", "simulated"], choices=NAVIGATORS)
    ap.add_argument("--fitted", help="a navigator export folder (garen-train export): the 'fitted' navigator")
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--limit", type=int, help="only the first N judged queries of each dataset")
    ap.add_argument("--cpu-default-limit", type=int, help="queries of the cpu-default rows (default: --limit)")
    ap.add_argument("--no-cpu-default", action="store_true")
    args = ap.parse_args(argv)
    if args.fitted and "fitted" not in args.navigators:
        args.navigators.append("fitted")
    return args


@contextlib.contextmanager
def rule_timer():
    """Seconds spent in the rule's own code (no model call in it): the evidence bookkeeping every rule records
    (GroupEvidence.observe and .reliability) and the adaptive ordering (Garen.adaptive_order). Wraps the methods
    for the duration of one run and yields the totals."""
    from garen_infer.methods import garen_adaptive
    from garen_infer.methods.garen import Garen

    totals = {"bookkeeping": 0.0, "ordering": 0.0}
    targets = [(garen_adaptive.GroupEvidence, "observe", "bookkeeping"),
               (garen_adaptive.GroupEvidence, "reliability", "bookkeeping"), (Garen, "adaptive_order", "ordering")]
    originals = [(cls, name, getattr(cls, name)) for cls, name, _ in targets]

    def timed(fn, key):
        def wrapper(*a, **k):
            start = time.thread_time()  # CPU time of this thread: on shared cores wall time counts the neighbours
            try:
                return fn(*a, **k)
            finally:
                totals[key] += time.thread_time() - start
        return wrapper

    for (cls, name, key), (_, _, fn) in zip(targets, originals):
        setattr(cls, name, timed(fn, key))
    try:
        yield totals
    finally:
        for cls, name, fn in originals:
            setattr(cls, name, fn)


class Bench:
    """One dataset's runs; each (reranker, navigator, rule) is an ordinary run folder."""

    def __init__(self, args, name: str, spec: str, index_path: str):
        from garen_infer.configuration.presets import load_preset
        from garen_infer.data import load_dataset
        from garen_infer.index.folder import IndexFolder
        from garen_infer.llm.cache import ResponseCache
        from garen_infer.llm.roles import build_roles

        self.args, self.name = args, name
        self.dataset = load_dataset(spec, name in args.allow_empty_docs)
        self.index = IndexFolder.open(index_path, self.dataset)
        self.preset = load_preset("cpu-default")
        self.doc_texts = [d.full_text for d in self.dataset.documents]
        built = build_roles({"reranker": {"backend": "embedding"}, "navigator": {"backend": "embedding"}},
                            self.doc_texts,
                            self.index, ResponseCache(None))
        self.cosine_reranker, self.models = built.reranker, {"minilm": built.scorer("navigator")}
        if args.fitted:
            spec = {"backend": "embedding", "model": str(Path(args.fitted).resolve())}
            self.models["fitted"] = build_roles(
                {"navigator": spec}, self.doc_texts, self.index, ResponseCache(None)
            ).scorer("navigator")

    def oracle(self, role: str, sigma: float, rho: float):
        from garen_infer.llm.roles import build_roles

        spec = {"backend": "oracle", "sigma": sigma, "seed": 0, "gain": "graded",
                **({"correlation": rho} if rho else {})}
        built = build_roles({role: spec}, self.doc_texts, self.index, None, dataset=self.dataset)
        return spec, built.reranker if role == "reranker" else built.scorer(role)

    def run(self, reranker: tuple, navigator: str, rule: str, limit: int | None) -> dict:
        """reranker: (label, sigma or None for cosine, rho). Returns the run's figures and per-query values."""
        from garen_infer.configuration.presets import run_config_from
        from garen_infer.evaluation.evaluate import per_query
        from garen_infer.llm.roles import Roles
        from garen_infer.running.session import execute
        from garen_infer.storage.atomic import write_json
        from garen_infer.storage.trec import read_run

        label, sigma, rho = reranker
        preset = {**self.preset, "methods": {**self.preset["methods"], "garen": {**RULES[rule]}}}
        if navigator in ("connectivity", "best-member"):
            preset["methods"]["garen"]["navigator"] = navigator
        if navigator == "minilm+best-member":
            preset["methods"]["garen"]["navigator"] = "model+best-member"
        config = run_config_from(preset, "garen", self.args.budget, limit)
        roles = Roles()
        if sigma is None:
            config.models["reranker"], roles.reranker = {"backend": "embedding"}, self.cosine_reranker
        else:
            config.models["reranker"], roles.reranker = self.oracle("reranker", sigma, rho)
        if navigator == "simulated":
            config.models["navigator"], roles.scorers["navigator"] = self.oracle("navigator", sigma, rho)
        elif navigator in self.models or navigator == "minilm+best-member":
            config.models["navigator"], roles.scorers["navigator"] = (
                self.preset["models"]["navigator"],
                self.models[navigator.split("+")[0]],
            )
            if navigator == "fitted":
                config.models["navigator"] = {"backend": "embedding", "model": str(Path(self.args.fitted).resolve())}
        else:
            config.models.pop("navigator", None)
        folder = Path(self.args.out) / self.name / label.replace(" ", "_") / f"{navigator}.{rule}"
        start = time.perf_counter()
        fresh = not (folder / "metrics.json").is_file()
        with rule_timer() as spent:
            metrics = execute(self.dataset, self.index, config, folder, roles=roles, log=lambda *_: None)
        queries = self.dataset.judged_queries()[:limit] if limit else self.dataset.judged_queries()
        timing = folder / "rule_ms_per_query.json"  # beside the run: a re-read run keeps the figures it measured
        if fresh:
            write_json(timing, {k: round(1000 * v / len(queries), 3) for k, v in spent.items()})
        rule_ms = json.loads(timing.read_text()) if timing.is_file() else None
        from garen_infer.data.dataset import Dataset

        judged = Dataset(self.dataset.name, [], queries, {q.id: self.dataset.qrels[q.id] for q in queries})
        values = per_query(read_run(folder / "run.trec"), judged, MEASURES)
        reliability = (metrics.get("navigator_reliability") or {}).get("mean")
        print(f"[bench] {self.name} {label} {navigator}.{rule}: nDCG@10 {metrics['nDCG@10']:.4f} R@100 "
              f"{metrics['R@100']:.4f} rho {reliability} ({time.perf_counter() - start:.0f} s)",
              file=sys.stderr, flush=True)
        return {"nDCG@10": metrics["nDCG@10"], "R@100": metrics["R@100"], "reliability": reliability,
                "rule_ms": rule_ms,
                "wall_seconds_per_query": metrics.get("wall_seconds_per_query"), "run": str(folder),
                "per_query": {m: [values[m][q.id] for q in queries] for m in MEASURES}}


def reach(bench: Bench, low: dict, high: dict) -> dict:
    """Why a rule that reorders GAREN's candidate groups cannot close the whole gap: the gold documents the
    simulated navigator's run put in its top 10 and the MiniLM run never reranked, and how many of them lie in a
    group the MiniLM run had among its candidates (scored groups; trace.jsonl). The others were never within reach
    of a switch rule: no k-NN edge from any window led to their groups; and how many lie in a group holding or
    neighbouring (k-NN) a gold document the MiniLM run did rerank, the only documents whose evidence is not noise
    (the cluster hypothesis the rule's H(g) relies on)."""
    from garen_infer.storage.trec import read_run

    groups = bench.index.groups("groups").doc_groups
    low_run, high_run = read_run(Path(low["run"]) / "run.trec"), read_run(Path(high["run"]) / "run.trec")
    traces = {json.loads(line)["qid"]: json.loads(line)["trace"]
              for line in (Path(low["run"]) / "trace.jsonl").read_text().splitlines()}
    missed = candidates = near = 0
    row = bench.dataset.doc_index
    for qid, trace in traces.items():
        gold = {d for d, g in bench.dataset.qrels.get(qid, {}).items() if g > 0 and d in row}
        top = sorted(high_run.get(qid, {}).items(), key=lambda kv: -kv[1])[:10]
        scored = set(trace.get("scored_groups", []))
        found = [row[d] for d in gold if d in low_run.get(qid, {})]  # gold the MiniLM run reranked
        reached = {g for f in found for n in [f, *bench.index.knn_graph.of(f)] for g in groups[n]}
        for doc, _ in top:
            if doc in gold and doc not in low_run.get(qid, {}):
                missed += 1
                candidates += bool(scored & set(groups[row[doc]]))
                near += bool(reached & set(groups[row[doc]]))
    return {"gold_missed": missed, "in_candidate_groups": candidates, "next_to_found_gold": near}


def rerankers(args) -> list[tuple[str, float | None, float]]:
    out = [
        (f"oracle sigma {s:g} {'uniform' if not r else f'correlated {r:g}'}", s, r)
        for r in args.correlations
        for s in args.sigmas
    ]
    return out


def rows_for(bench: Bench, reranker: tuple, navigators, rules, limit, variants: bool = False) -> list[dict]:
    from garen_infer.report.significance import compare_paired

    runs = {(n, r): bench.run(reranker, n, r, limit) for n in navigators for r in rules}
    low, high = runs.get(("minilm", "fixed")), runs.get(("simulated", "fixed"))
    gap = high["nDCG@10"] - low["nDCG@10"] if low and high else None
    reachable = reach(bench, low, high) if low and high and not variants else None
    rows = []
    for (navigator, rule), run in runs.items():
        if variants and rule == "fixed":
            continue  # its row is in the main grid
        base = runs[(navigator, "fixed")]
        tests = {m: compare_paired(run["per_query"][m], base["per_query"][m]) for m in MEASURES}
        share = (run["nDCG@10"] - low["nDCG@10"]) / gap if gap else None
        rows.append({"dataset": bench.name, "reranker": reranker[0], "navigator": navigator, "rule": rule,
                     "queries": len(run["per_query"]["nDCG@10"]), "nDCG@10": round(run["nDCG@10"], 4),
                     "R@100": round(run["R@100"], 4),
                     "gap_share": None if share is None else round(share, 4),
                     "gap": None if gap is None else round(gap, 4),
                     "reach": reachable if (navigator, rule) == ("minilm", "fixed") else None,
                     "reliability": run["reliability"], "rule_ms_per_query": run["rule_ms"],
                     "wall_seconds_per_query": run["wall_seconds_per_query"], "run": run["run"],
                     "versus_fixed": {m: {"difference": round(t.difference, 4),
                                          "randomisation_p": round(t.randomisation_p, 4),
                                          "wins": t.wins, "losses": t.losses} for m, t in tests.items()}})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["GAREN, fixed vs adaptive switch rule; oracle rerankers and the simulated navigator are a SIMULATION", "",
             "| dataset | reranker | navigator | rule | queries | nDCG@10 | R@100 | gap share | vs fixed "
             "nDCG@10 (p; W-L) | vs fixed R@100 (p) | rho | rule ms/query (bookkeeping + ordering) | s/query |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        nd, rc = r["versus_fixed"]["nDCG@10"], r["versus_fixed"]["R@100"]
        versus = (
            "-"
            if r["rule"] == "fixed"
            else f"{nd['difference']:+.4f} (p {nd['randomisation_p']:.3f}; {nd['wins']}-{nd['losses']})"
        )
        versus_r = "-" if r["rule"] == "fixed" else f"{rc['difference']:+.4f} (p {rc['randomisation_p']:.3f})"
        share = "-" if r["gap_share"] is None else f"{r['gap_share']:+.2f}"
        rho = "-" if r["reliability"] is None else f"{r['reliability']:.2f}"
        ms = r.get("rule_ms_per_query")
        ms = "-" if not ms else f"{ms['bookkeeping']:.2f} + {ms['ordering']:.2f}"
        lines.append(f"| {r['dataset']} | {r['reranker']} | {r['navigator']} | {r['rule']} | {r['queries']} "
                     f"| {r['nDCG@10']:.4f} | {r['R@100']:.4f} | {share} | {versus} | {versus_r} | {rho} | {ms} | "
                     f"{r['wall_seconds_per_query']} |")
    reach_lines = [
        f"- {r['dataset']}, {r['reranker']}: {r['reach']['gold_missed']} gold documents in the simulated "
        f"navigator's top 10 that MiniLM fixed never reranked, {r['reach']['in_candidate_groups']} of them in a "
        f"group MiniLM fixed had among its candidates, {r['reach']['next_to_found_gold']} in a "
        f"group holding or neighbouring a gold document it reranked"
        for r in rows
        if r.get("reach")
    ]
    if reach_lines:
        lines += ["", "Within reach of a switch rule (it reorders the candidate groups only):", *reach_lines]
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    from garen_infer.llm.oracle import NOTICE
    from garen_infer.storage.atomic import write_json, write_text

    specs = dict(item.split("=", 1) for item in args.dataset)
    indexes = dict(item.split("=", 1) for item in args.index)
    rows = []
    for name, spec in specs.items():
        bench = Bench(args, name, spec, indexes[name])
        for i, reranker in enumerate(rerankers(args)):
            rows += rows_for(bench, reranker, args.navigators, args.rules, args.limit)
            if i == 0 and args.variant_rules:
                rows += rows_for(bench, reranker, args.variant_navigators, ["fixed", *args.variant_rules], args.limit,
                                 variants=True)
        if not args.no_cpu_default:
            limit = args.cpu_default_limit or args.limit
            rows += rows_for(bench, ("cpu-default cosine", None, 0.0), ["minilm"], args.rules, limit)
        write_text(Path(args.out) / "summary.md", table(rows) + "\n")  # after each dataset: a partial table to read
    out = Path(args.out)
    write_json(out / "summary.json", {"simulation": NOTICE, "budget": args.budget, "limit": args.limit,
                                      "command": " ".join(["python", *sys.argv]), "rows": rows})
    write_text(out / "summary.md", table(rows) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
