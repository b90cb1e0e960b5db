"""How much of the gap to a perfect navigator does a navigator adapted without judgments close?

GAREN at one budget with three navigators: (i) the zero-shot MiniLM (cpu-default's cosine), (ii) an adapted export
(``make adapt-navigator``: trained on synthetic queries only), (iii) the oracle navigator at the reranker's sigma;
each with the oracle reranker (a SIMULATION, llm/oracle.py) at every ``--sigmas`` with uniform and correlated noise
(``--correlations``), through benchmarks/oracle_sweep.py; and (i), (ii) with cpu-default's own cosine reranker.
It prints, per reranker, nDCG@10 and R@100 of each navigator, the share of the (iii) - (i) nDCG@10 gap that (ii)
closes with a bootstrap 95% interval, and paired tests of (ii) against (i) (randomisation test, 10,000 draws).

    python benchmarks/navigator_gap.py --dataset beir:../shared/data/cranfield:test --allow-empty-docs \
        --index indexes/cranfield --adapted checkpoints/adapted-cranfield --out runs/navigator-gap/cranfield --limit 60

Finished runs are re-read, not run again. Writes summary.json and summary.md to --out.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
MEASURES = ("nDCG@10", "R@100")
NAVIGATORS = ("zero-shot", "adapted", "oracle")
BOOTSTRAP = 10_000


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True, help="the evaluation split, e.g. beir:<folder>:test")
    ap.add_argument("--index", required=True, help="a cpu-default index of its corpus, with GAREN's stages")
    ap.add_argument("--allow-empty-docs", action="store_true")
    ap.add_argument("--adapted", required=True, help="the adapted navigator's export folder (garen-train export)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sigmas", nargs="+", type=float, default=[0.3, 0.5])
    ap.add_argument("--correlations", nargs="+", type=float, default=[0.0, 0.5],
                    help="0: uniform noise; rho: correlated")
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--limit", type=int, help="only the first N judged queries (the same N in every run)")
    return ap.parse_args(argv)


def oracle_runs(args, out: Path, preset: Path) -> dict[tuple[str, str], Path]:
    """(reranker label, navigator) -> run folder, for every sigma and noise."""
    folders = {}
    for rho in args.correlations:
        sweep = out / f"oracle-rho-{rho:g}"
        command = [sys.executable, str(REPO / "benchmarks" / "oracle_sweep.py"), "--dataset", args.dataset,
                   "--index", args.index,
                   "--out", str(sweep), "--methods", "garen", "--navigators", "embedding", "oracle", str(preset),
                   "--sigmas", *map(str, args.sigmas), "--budget", str(args.budget), "--correlation",
                   str(rho), "--against", "garen"]
        command += ["--allow-empty-docs"] * args.allow_empty_docs + (["--limit", str(args.limit)] if args.limit else [])
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        noise = "uniform" if rho == 0 else f"correlated {rho:g}"
        for sigma in args.sigmas:
            for navigator, column in zip(NAVIGATORS, ("embedding", preset.stem, "oracle")):
                folders[(f"oracle sigma {sigma:g}, {noise}", navigator)] = (
                    sweep / f"garen.nav-{column}" / f"sigma-{sigma:g}"
                )
    return folders


def cosine_runs(args, out: Path) -> dict[tuple[str, str], Path]:
    """GAREN with cpu-default's own reranker (cosine), with the zero-shot and the adapted navigator."""
    folders = {}
    for navigator, spec in (("zero-shot", "{backend: embedding}"),
                            ("adapted", f"{{backend: embedding, model: {args.adapted}}}")):
        folder = out / "cpu-default" / f"garen-{navigator}"
        if not (folder / "metrics.json").is_file():
            command = [sys.executable, "-m", "garen_infer", "run", "--dataset", args.dataset, "--index",
                       args.index, "--method", "garen",
                       "--budget", str(args.budget), "--out", str(folder), "--set", f"models.navigator={spec}"]
            command += ["--allow-empty-docs"] * args.allow_empty_docs + (
                ["--limit", str(args.limit)] if args.limit else []
            )
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        folders[("cpu-default cosine", navigator)] = folder
    return folders


def per_query(folder: Path, dataset) -> dict[str, dict[str, float]]:
    """measure -> query id -> value, for the run in ``folder``."""
    from garen_infer.evaluation.evaluate import per_query as measure
    from garen_infer.storage.trec import read_run

    return measure(read_run(folder / "run.trec"), dataset, MEASURES)


def gap_share(zero, adapted, oracle, seed: int = 0) -> dict:
    """(mean(ii) - mean(i)) / (mean(iii) - mean(i)), and its bootstrap 95% interval over queries."""
    zero, adapted, oracle = map(np.asarray, (zero, adapted, oracle))
    gap = oracle.mean() - zero.mean()
    share = (adapted.mean() - zero.mean()) / gap if gap else float("nan")
    draws = np.random.default_rng(seed).integers(0, len(zero), size=(BOOTSTRAP, len(zero)))
    gaps = oracle[draws].mean(1) - zero[draws].mean(1)
    shares = (adapted[draws].mean(1) - zero[draws].mean(1))[gaps > 0] / gaps[gaps > 0]
    low, high = np.percentile(shares, [2.5, 97.5]) if len(shares) else (float("nan"), float("nan"))
    return {"gap": round(float(gap), 4), "share": round(float(share), 4),
            "ci95": [round(float(low), 4), round(float(high), 4)]}


def summarise(folders: dict[tuple[str, str], Path], dataset) -> list[dict]:
    from garen_infer.report.significance import compare_paired

    rows = []
    for reranker in dict.fromkeys(r for r, _ in folders):
        values = {nav: per_query(folders[(reranker, nav)], dataset) for nav in NAVIGATORS if (reranker, nav) in folders}
        qids = sorted(values["zero-shot"][MEASURES[0]])
        row = {"reranker": reranker, "queries": len(qids),
               "runs": {nav: str(folders[(reranker, nav)]) for nav in values}}
        for m in MEASURES:
            series = {nav: [v[m][q] for q in qids] for nav, v in values.items()}
            row[m] = {nav: round(float(np.mean(s)), 4) for nav, s in series.items()}
            test = compare_paired(series["adapted"], series["zero-shot"])
            row[f"{m} adapted - zero-shot"] = {"difference": round(test.difference, 4),
                                               "randomisation_p": round(test.randomisation_p, 4),
                                               "wins": test.wins, "losses": test.losses}
            if "oracle" in series:
                row[f"{m} gap closed"] = gap_share(series["zero-shot"], series["adapted"], series["oracle"])
        rows.append(row)
    return rows


def table(rows: list[dict], dataset_name: str, budget: int) -> str:
    lines = [f"{dataset_name}, GAREN at budget {budget}: navigators (i) zero-shot MiniLM, (ii) adapted "
             "without judgments, (iii) oracle at the reranker's sigma (oracle rerankers are a SIMULATION)", "",
             "| reranker | queries | nDCG@10 (i) / (ii) / (iii) | share of the gap (ii) closes [95% CI] | "
             "(ii) - (i) nDCG@10 (p) | R@100 (i) / (ii) / (iii) | (ii) - (i) R@100 (p) |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        cells = [row["reranker"], str(row["queries"])]
        for m in MEASURES:
            cells.append(" / ".join(f"{row[m][nav]:.4f}" for nav in NAVIGATORS if nav in row[m]))
            if m == "nDCG@10":
                gap = row.get(f"{m} gap closed")
                cells.append(f"{gap['share']:+.2f} [{gap['ci95'][0]:+.2f}, {gap['ci95'][1]:+.2f}] of "
                             f"{gap['gap']:+.4f}" if gap else "-")
            test = row[f"{m} adapted - zero-shot"]
            cells.append(f"{test['difference']:+.4f} (p {test['randomisation_p']:.3f}; "
                         f"{test['wins']}-{test['losses']})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    from garen_infer.data import load_dataset
    from garen_infer.storage.atomic import write_json, write_text

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    preset = out / "adapted.yaml"  # oracle_sweep reads a real navigator from a preset's models.navigator
    preset.write_text("extends: cpu-default\nmodels:\n  navigator: {backend: embedding, model: "
                      f"{Path(args.adapted).resolve()}}}\n")
    dataset = load_dataset(args.dataset, args.allow_empty_docs)
    folders = {**oracle_runs(args, out, preset), **cosine_runs(args, out)}
    judged = dataset.judged_queries()[: args.limit] if args.limit else dataset.judged_queries()
    from garen_infer.data.dataset import Dataset

    rows = summarise(folders, Dataset(dataset.name, [], judged, {q.id: dataset.qrels[q.id] for q in judged}))
    text = table(rows, dataset.name, args.budget)
    write_json(out / "summary.json", {"dataset": dataset.name, "budget": args.budget, "adapted": args.adapted,
                                      "command": " ".join(["python", *sys.argv]), "rows": rows})
    write_text(out / "summary.md", text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
