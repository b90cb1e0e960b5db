"""GAREN's switch rule, fixed (the paper's tau_switch) against adaptive (methods/garen_adaptive.py), navigator by
navigator, with the oracle reranker (a SIMULATION, llm/oracle.py) and with cpu-default's own MiniLM reranker.

For each dataset and each reranker (oracle at every ``--sigmas`` with uniform noise and correlated noise at every
``--correlations``, then cpu-default's cosine) it runs GAREN at one budget with every navigator x rule:
navigators ``minilm`` (cpu-default's cosine on the group summaries), ``connectivity`` (sec. 6.4, no model),
``best-member`` (no summary: max cosine between the query and a group's members, from the index's embeddings),
``simulated`` (the oracle navigator at the reranker's sigma and noise) and, with ``--fitted``, a navigator export;
rules ``fixed``, ``adaptive``, ``adaptive-scores`` (the adaptive scores with the fixed switch) and
``adaptive-l0.25`` (adaptive, evidence weight 0.75 rather than 0.5 while the navigator's reliability is
unknown). It prints nDCG@10, R@100,
the share of the nDCG@10 gap (minilm fixed -> simulated fixed) each run recovers, the paired test of each rule
against the same navigator's fixed rule (randomisation test, garen_infer/report/significance.py), the mean
navigator reliability (Spearman rho, per query) and the wall seconds per query.

    python benchmarks/garen_adaptive.py --dataset scifact=beir:DATA/scifact:test --index scifact=IDX/scifact \
        --dataset cranfield=beir:DATA/cranfield:test --index cranfield=IDX/cranfield --allow-empty-docs cranfield \
        --out runs/garen-adaptive --limit 100

Finished runs are re-read, not run again. Writes summary.json and summary.md to --out.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MEASURES = ("nDCG@10", "R@100")
RULES = {"fixed": {}, "adaptive": {"switch_rule": "adaptive"}, "adaptive-scores": {"switch_rule": "adaptive-scores"},
         "adaptive-l0.25": {"switch_rule": "adaptive", "adaptive_prior_min": 0.25}}
NAVIGATORS = ("minilm", "connectivity", "best-member", "simulated", "fitted")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", action="append", required=True, help="NAME=SPEC, repeatable")
    ap.add_argument("--index", action="append", required=True, help="NAME=FOLDER, one per dataset")
    ap.add_argument("--allow-empty-docs", nargs="*", default=[], help="the dataset NAMEs with empty documents")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sigmas", nargs="+", type=float, default=[0.3, 0.5])
    ap.add_argument("--correlations", nargs="+", type=float, default=[0.0, 0.5])
    ap.add_argument("--navigators", nargs="+", default=list(NAVIGATORS[:4]), choices=NAVIGATORS)
    ap.add_argument("--rules", nargs="+", default=list(RULES), choices=list(RULES))
    ap.add_argument("--fitted", help="a navigator export folder (garen-train export): the 'fitted' navigator")
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--limit", type=int, help="only the first N judged queries of each dataset")
    ap.add_argument("--cpu-default-limit", type=int, help="queries of the cpu-default rows (default: --limit)")
    ap.add_argument("--no-cpu-default", action="store_true")
    return ap.parse_args(argv)


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
        from garen_infer.storage.trec import read_run

        label, sigma, rho = reranker
        preset = {**self.preset, "methods": {**self.preset["methods"], "garen": {**RULES[rule]}}}
        if navigator in ("connectivity", "best-member"):
            preset["methods"]["garen"]["navigator"] = navigator
        config = run_config_from(preset, "garen", self.args.budget, limit)
        roles = Roles()
        if sigma is None:
            config.models["reranker"], roles.reranker = {"backend": "embedding"}, self.cosine_reranker
        else:
            config.models["reranker"], roles.reranker = self.oracle("reranker", sigma, rho)
        if navigator == "simulated":
            config.models["navigator"], roles.scorers["navigator"] = self.oracle("navigator", sigma, rho)
        elif navigator in self.models:
            config.models["navigator"], roles.scorers["navigator"] = (
                self.preset["models"]["navigator"],
                self.models[navigator],
            )
            if navigator == "fitted":
                config.models["navigator"] = {"backend": "embedding", "model": str(Path(self.args.fitted).resolve())}
        else:
            config.models.pop("navigator", None)
        folder = Path(self.args.out) / self.name / label.replace(" ", "_") / f"{navigator}.{rule}"
        start = time.perf_counter()
        metrics = execute(self.dataset, self.index, config, folder, roles=roles, log=lambda *_: None)
        queries = self.dataset.judged_queries()[:limit] if limit else self.dataset.judged_queries()
        from garen_infer.data.dataset import Dataset

        judged = Dataset(self.dataset.name, [], queries, {q.id: self.dataset.qrels[q.id] for q in queries})
        values = per_query(read_run(folder / "run.trec"), judged, MEASURES)
        reliability = (metrics.get("navigator_reliability") or {}).get("mean")
        print(f"[bench] {self.name} {label} {navigator}.{rule}: nDCG@10 {metrics['nDCG@10']:.4f} R@100 "
              f"{metrics['R@100']:.4f} rho {reliability} ({time.perf_counter() - start:.0f} s)",
              file=sys.stderr, flush=True)
        return {"nDCG@10": metrics["nDCG@10"], "R@100": metrics["R@100"], "reliability": reliability,
                "wall_seconds_per_query": metrics.get("wall_seconds_per_query"), "run": str(folder),
                "per_query": {m: [values[m][q.id] for q in queries] for m in MEASURES}}


def rerankers(args) -> list[tuple[str, float | None, float]]:
    out = [
        (f"oracle sigma {s:g} {'uniform' if not r else f'correlated {r:g}'}", s, r)
        for r in args.correlations
        for s in args.sigmas
    ]
    return out


def rows_for(bench: Bench, reranker: tuple, navigators, rules, limit) -> list[dict]:
    from garen_infer.report.significance import compare_paired

    runs = {(n, r): bench.run(reranker, n, r, limit) for n in navigators for r in rules}
    low, high = runs.get(("minilm", "fixed")), runs.get(("simulated", "fixed"))
    gap = high["nDCG@10"] - low["nDCG@10"] if low and high else None
    rows = []
    for (navigator, rule), run in runs.items():
        base = runs[(navigator, "fixed")]
        tests = {m: compare_paired(run["per_query"][m], base["per_query"][m]) for m in MEASURES}
        share = (run["nDCG@10"] - low["nDCG@10"]) / gap if gap else None
        rows.append({"dataset": bench.name, "reranker": reranker[0], "navigator": navigator, "rule": rule,
                     "queries": len(run["per_query"]["nDCG@10"]), "nDCG@10": round(run["nDCG@10"], 4),
                     "R@100": round(run["R@100"], 4),
                     "gap_share": None if share is None else round(share, 4),
                     "gap": None if gap is None else round(gap, 4),
                     "reliability": run["reliability"],
                     "wall_seconds_per_query": run["wall_seconds_per_query"], "run": run["run"],
                     "versus_fixed": {m: {"difference": round(t.difference, 4),
                                          "randomisation_p": round(t.randomisation_p, 4),
                                          "wins": t.wins, "losses": t.losses} for m, t in tests.items()}})
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "GAREN, fixed vs adaptive switch rule; oracle rerankers and the simulated navigator are a SIMULATION",
        "",
        "| dataset | reranker | navigator | rule | queries | nDCG@10 | R@100 | gap share | vs fixed nDCG@10 (p; W-L) "
        "| vs fixed R@100 (p) | rho | s/query |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
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
        lines.append(
            f"| {r['dataset']} | {r['reranker']} | {r['navigator']} | {r['rule']} | {r['queries']} | "
            f"{r['nDCG@10']:.4f} "
            f"| {r['R@100']:.4f} | {share} | {versus} | {versus_r} | {rho} | {r['wall_seconds_per_query']} |"
        )
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
        for reranker in rerankers(args):
            rows += rows_for(bench, reranker, args.navigators, args.rules, args.limit)
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
