"""SIMULATION: every method against reranker quality, with the oracle backend as a reranker of known quality.

For each noise level sigma the reranker is the oracle (llm/oracle.py: graded gain + sigma * N(0, 1), seeded per
(query, document)), and each method runs at the same budget through the ordinary runner, so each run folder has
its config.json, trace.jsonl, run.trec and metrics.json, all labelled as a simulation. GAREN's navigator is
either a real model or the oracle. It prints, per sigma, the rule's pairwise accuracy for gains one grade apart,
the accuracy measured on the first stage's top documents, and each method's nDCG@10 and R@100. It also writes
summary.json and summary.md to --out.

    python benchmarks/oracle_sweep.py --dataset beir:../shared/data/scifact:test --index indexes/scifact \
        --out runs/oracle-scifact --navigators embedding oracle

Navigators (``--navigators``, any of):
- ``embedding``: the index's embedding model (MiniLM with cpu-default), a real model;
- ``oracle``: the simulated navigator; its sigma is ``--navigator-sigma``, or the reranker's sigma if not given;
- a YAML preset path: its ``models.navigator`` (e.g. a trained navigator exported by garen-train).
Methods (``--methods``): by default every registered method whose model roles the sweep can fill (a reranker,
optionally a navigator); methods without a reranker (bm25) run once and show the same numbers in every row.
Finished runs are re-read, not recomputed.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIGMAS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
MEASURES = ("nDCG@10", "R@100")
PLAYABLE = {"reranker", "navigator", "generator"}  # roles the sweep fills (the generator: REPAIR's simulated planner,
#   llm/simulated_planner.py, at the reranker's sigma); a method needing others (an agent) is skipped


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True, help="a dataset spec with relevance judgments, e.g. beir:<folder>:test")
    ap.add_argument("--index", required=True, help="an index folder with the stages the methods need")
    ap.add_argument("--allow-empty-docs", action="store_true", help="Cranfield has two empty documents")
    ap.add_argument("--out", required=True, help="folder for the run folders and the summary")
    ap.add_argument("--methods", nargs="+", help="default: every registered method whose roles the sweep can fill")
    ap.add_argument("--sigmas", nargs="+", type=float, default=list(SIGMAS), help="reranker noise levels")
    ap.add_argument("--navigators", nargs="+", default=["embedding"], help="embedding | oracle | a preset YAML path")
    ap.add_argument("--navigator-sigma", type=float, help="the simulated navigator's sigma (default: the reranker's)")
    ap.add_argument("--gain", default="graded", help="graded | binary (the oracle's gain)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--correlation", type=float, default=0.0,
                    help="rho: the share of the oracle's noise that documents close in embedding space share "
                    "(0 = uniform)")
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--pool", type=int, default=100, help="first-stage depth over which pairwise accuracy is measured")
    ap.add_argument("--preset", default="cpu-default", help="methods' options, first stage and run settings")
    ap.add_argument("--limit", type=int, help="only the first N judged queries")
    ap.add_argument("--compare", default="garen", help="the method whose paired differences are printed")
    ap.add_argument("--against", nargs="+", default=["rerank", "slidegar"], help="the methods it is compared with")
    ap.add_argument("--cache",
                    help="response cache for a model navigator (default ~/.cache/garen/responses.sqlite, or "
                    "$GAREN_CACHE_DIR)")
    return ap.parse_args(argv)


def sweep_methods(names, preset: dict):
    """(name, method class, its roles with the preset's options) for each method to run; the registry's methods
    the sweep can fill by default."""
    from garen_infer.errors import GarenError
    from garen_infer.methods.base import METHODS, get_method, make_config

    chosen = []
    for name in names or list(METHODS):
        try:
            method = get_method(name)
        except GarenError as err:  # a name the registry does not know
            print(f"[sweep] skipping {name}: {err}", file=sys.stderr)
            continue
        roles = method.roles_for(make_config(method, dict((preset.get("methods") or {}).get(name) or {})))
        if not set(roles) <= PLAYABLE:
            print(f"[sweep] skipping {name}: it needs {', '.join(sorted(set(roles) - PLAYABLE))}, which the "
                  "oracle cannot play", file=sys.stderr)
            continue
        if names is None and not {"reranker", "generator"} & set(roles) and name != "bm25":
            continue
        chosen.append((name, method, roles))
    return chosen


def navigator_spec(name: str) -> dict:
    from garen_infer.configuration.presets import load_preset

    if name in ("embedding", "oracle"):
        return {"backend": name}
    spec = (load_preset(name).get("models") or {}).get("navigator")
    if not spec:
        from garen_infer.errors import GarenError

        raise GarenError(f"--navigators {name}: the preset has no models.navigator")
    return spec


def navigator_label(name: str) -> str:
    return name if name in ("embedding", "oracle") else Path(name).stem


class Sweep:
    """The runs of one sweep: each (method, sigma, navigator) is an ordinary run folder under ``out``."""

    def __init__(self, args, dataset, index, preset, navigators: list[str]):
        from garen_infer.data.dataset import Dataset
        from garen_infer.llm.cache import ResponseCache
        from garen_infer.llm.roles import build_roles

        self.args, self.dataset, self.index, self.preset = args, dataset, index, preset
        self.queries = dataset.judged_queries()[: args.limit] if args.limit else dataset.judged_queries()
        self.judged = Dataset(dataset.name, [], self.queries, {q.id: dataset.qrels[q.id] for q in self.queries})
        self.doc_texts = [d.full_text for d in dataset.documents]
        self.oracle = {"backend": "oracle", "seed": args.seed, "gain": args.gain,
                       **({"correlation": args.correlation} if args.correlation else {})}
        self.real_navigators = {  # built once: a real navigator's caches serve every sigma
            name: build_roles({"navigator": spec}, self.doc_texts, index, ResponseCache(args.cache)).scorer("navigator")
            for name, spec in ((n, navigator_spec(n)) for n in navigators) if spec["backend"] != "oracle"
        }

    def oracle_role(self, role: str, sigma: float):
        from garen_infer.llm.roles import build_roles

        spec = {**self.oracle, "sigma": sigma}
        built = build_roles({role: spec}, self.doc_texts, self.index, None, dataset=self.dataset)
        played = {"reranker": built.reranker, "generator": built.generator}
        return spec, (played[role] if role in played else built.scorer(role))

    def run(self, name: str, roles_used: tuple[str, ...], sigma: float, nav: str | None) -> tuple[str, dict, dict]:
        """One run folder (re-read when finished); returns its column name, metrics and per-query values."""
        from garen_infer.configuration.presets import run_config_from
        from garen_infer.evaluation.evaluate import per_query
        from garen_infer.llm.roles import Roles
        from garen_infer.running.session import execute
        from garen_infer.storage.trec import read_run

        column = name if nav is None else f"{name}[nav={navigator_label(nav)}]"
        config = run_config_from(self.preset, name, self.args.budget, self.args.limit)
        config.models, roles = {}, Roles()
        if "reranker" in roles_used:
            config.models["reranker"], roles.reranker = self.oracle_role("reranker", sigma)
        if "generator" in roles_used:  # REPAIR's planning step reranker: the oracle reranker's order, a judged plan
            config.models["generator"], roles.generator = self.oracle_role("generator", sigma)
        if nav == "oracle":
            nav_sigma = sigma if self.args.navigator_sigma is None else self.args.navigator_sigma
            config.models["navigator"], roles.scorers["navigator"] = self.oracle_role("navigator", nav_sigma)
        elif nav is not None:
            config.models["navigator"], roles.scorers["navigator"] = navigator_spec(nav), self.real_navigators[nav]
        folder = Path(self.args.out) / column.replace("[", ".").replace("]", "").replace("=", "-")
        # a simulated navigator's noise follows sigma too (LATTICE)
        simulated = roles.reranker or roles.generator or nav == "oracle"
        folder /= f"sigma-{sigma:g}" if simulated else "no-reranker"
        metrics = execute(self.dataset, self.index, config, folder, roles=roles, log=lambda *_: None)
        print(f"[sweep] sigma={sigma:g} {column}: nDCG@10 {metrics['nDCG@10']:.4f}  R@100 "
              f"{metrics['R@100']:.4f}", file=sys.stderr, flush=True)
        means = {m: round(metrics[m], 4) for m in MEASURES}
        return column, {**means, "run": str(folder)}, per_query(read_run(folder / "run.trec"), self.judged, MEASURES)


def main(argv=None) -> int:
    args = parse_args(argv)
    from garen_infer.configuration.presets import load_preset
    from garen_infer.data import load_dataset
    from garen_infer.errors import GarenError
    from garen_infer.index.first_stage import FirstStageConfig, first_stage
    from garen_infer.index.folder import IndexFolder
    from garen_infer.llm.oracle import NOTICE, banner, expected_pairwise_accuracy, pairwise_accuracy
    from garen_infer.storage.atomic import write_json, write_text

    try:
        dataset = load_dataset(args.dataset, args.allow_empty_docs)
        index = IndexFolder.open(args.index, dataset)
        preset = load_preset(args.preset)
        methods = sweep_methods(args.methods, preset)
        sweep = Sweep(args, dataset, index, preset,
                      args.navigators if any("navigator" in roles for *_, roles in methods) else [])
        queries = sweep.queries
        depth = {**(preset.get("first_stage") or {}), "depth": args.pool}
        pools = dict(zip((q.id for q in queries),
                         first_stage(index, [q.text for q in queries], FirstStageConfig(**depth))))
        rows, columns = [], {}
        for sigma in args.sigmas:
            judge = sweep.oracle_role("reranker", sigma)[1].judge
            uniform = not args.correlation  # the stated accuracy of correlated noise depends on the pool: measured only
            row = {"sigma": sigma,
                   "expected_pairwise_accuracy": round(expected_pairwise_accuracy(sigma), 4) if uniform else None,
                   "measured_pairwise_accuracy": round(pairwise_accuracy(judge, pools), 4), "runs": {}}
            values = {}
            for name, _, roles in methods:
                for nav in args.navigators if "navigator" in roles else [None]:
                    column, row["runs"][column], values[column] = sweep.run(name, roles, sigma, nav)
                    columns[column] = name
            baselines = [b for against in args.against for b in values if columns[b] == against]
            row["versus"] = {f"{a} - {b}": {m: paired(values[a][m], values[b][m]) for m in MEASURES}
                             for a in values if columns[a] == args.compare for b in baselines}
            rows.append(row)
    except GarenError as err:
        print(f"oracle_sweep: error: {err}", file=sys.stderr)
        return 2

    label = {"notice": NOTICE, "roles": {"reranker": sweep.oracle | {"sigma": "swept"}}}
    summary = {"simulation": label, "dataset": dataset.name, "queries": len(queries), "budget": args.budget,
               "navigator_sigma": args.navigator_sigma, "pool": args.pool,
               "command": " ".join(["python", *sys.argv]), "rows": rows}
    table = format_table(summary, list(columns)) + "\n\n" + format_versus(summary)
    write_json(Path(args.out) / "summary.json", summary)
    write_text(Path(args.out) / "summary.md", table + "\n")
    print(banner(label))
    print(table)
    print(banner(label))
    return 0


def paired(a: dict[str, float], b: dict[str, float]) -> list[float]:
    """Mean per-query difference a - b and the half-width of its 95% confidence interval (normal approximation)."""
    diffs = [a[q] - b[q] for q in a]
    half = 1.96 * statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else float("nan")
    return [round(statistics.fmean(diffs), 4), round(half, 4)]


def format_versus(summary: dict) -> str:
    """Paired differences per sigma: mean +- 95% CI half-width, nDCG@10 / R@100."""
    pairs = list(dict.fromkeys(p for row in summary["rows"] for p in row["versus"]))
    if not pairs:
        return ""
    header = ["sigma"] + [f"{p} (nDCG@10 / R@100)" for p in pairs]
    lines = ["Paired differences over the same queries, mean +- 95% CI half-width:", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in summary["rows"]:
        cells = [f"{row['sigma']:g}"]
        for p in pairs:
            d = row["versus"].get(p)
            cells.append(" / ".join(f"{d[m][0]:+.4f} ±{d[m][1]:.4f}" for m in MEASURES) if d else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_table(summary: dict, columns: list[str]) -> str:
    """A markdown table: one row per sigma, nDCG@10 / R@100 per method."""
    rho = summary["simulation"]["roles"]["reranker"].get("correlation", 0.0)
    noise = f"noise correlation {rho:g} * cos between neighbours" if rho else "uniform noise"
    head = [f"SIMULATED reranker (oracle: {summary['simulation']['roles']['reranker']['gain']} gain + sigma "
            f"* N(0,1), {noise}); {summary['dataset']}, {summary['queries']} queries, budget {summary['budget']}; "
            f"measured accuracy over the first stage's top {summary['pool']}", ""]
    header = ["sigma", "acc (1 grade)", "acc measured"] + [f"{c} nDCG@10 / R@100" for c in columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in summary["rows"]:
        expected = row["expected_pairwise_accuracy"]
        cells = [f"{row['sigma']:g}", "-" if expected is None else f"{expected:.4f}",
                 f"{row['measured_pairwise_accuracy']:.4f}"]
        cells += [
            f"{row['runs'][c]['nDCG@10']:.4f} / {row['runs'][c]['R@100']:.4f}" if c in row["runs"] else "-"
            for c in columns
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(head + lines)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
