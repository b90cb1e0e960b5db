"""``garen-infer compare RUN_A RUN_B --dataset ...``: two runs query by query. Wins, losses and ties per measure, the
paired t-test (GAREN's tables) and a paired randomisation test, and the queries where they differ most. A run is a
run folder or a plain TREC run file from another system.

Every number is over one set of queries, the judged queries both runs answer (a pair needs both values), and the
output says so every time: a query only one run answers is left out of both means, not scored 0 for the other."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from garen_infer.report.matrix import paired
from garen_infer.report.run_results import MEASURES, RunResult

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset


def compare_runs(folder_a, folder_b, dataset: Dataset, measures=MEASURES, permutations: int = 10_000,
                 seed: int = 0, show: int = 5) -> dict:
    a, b = RunResult.load(folder_a), RunResult.load(folder_b)
    scores_a, scores_b = a.per_query(dataset, measures), b.per_query(dataset, measures)
    first = measures[0]
    common = sorted(set(scores_a[first]) & set(scores_b[first]))
    deltas = sorted(((scores_a[first][q] - scores_b[first][q], q) for q in common), key=lambda x: (x[0], x[1]))
    return {
        "a": _describe(a), "b": _describe(b), "dataset": dataset.name,
        "queries": {"a": len(scores_a[first]), "b": len(scores_b[first]), "both": len(common)},
        "mean_over": "judged_in_both",
        "measures": {m: paired(scores_a[m], scores_b[m], permutations, seed).to_dict() for m in measures},
        "largest_differences": {
            "measure": first,
            "a_better": [
                {"query": q, "a": scores_a[first][q], "b": scores_b[first][q]}
                for d, q in reversed(deltas[-show:])
                if d > 0
            ],
            "b_better": [
                {"query": q, "a": scores_a[first][q], "b": scores_b[first][q]}
                for d, q in deltas[:show]
                if d < 0
            ],
        },
        "permutations": permutations, "seed": seed,
    }


def _describe(run: RunResult) -> dict:
    described = {"run": str(run.folder), "method": run.method, "budget": run.budget}
    if run.external:
        described["tag"] = run.config["tag"]
    if run.config.get("simulation"):  # the oracle backend: never to pass for a model's numbers
        described["simulation"] = run.config["simulation"]
    return described


def format_comparison(result: dict) -> str:
    a, b = result["a"], result["b"]
    lines = [
        *(f"{name}: {run['run']} ({run['method']}{', tag ' + run['tag'] if 'tag' in run else ''}"
          f"{'' if run['budget'] is None else ', budget ' + str(run['budget'])})"
          f"{' [SIMULATED]' if 'simulation' in run else ''}" for name, run in (("A", a), ("B", b))),
        _queries_line(result),
        "",
        f"{'measure':10} {'A':>8} {'B':>8} {'A-B':>8} {'95% CI of A-B':>19} {'wins':>5} {'losses':>6} "
        f"{'ties':>5} {'t-test p':>9} {'random. p':>9}",
    ]
    for measure, c in result["measures"].items():
        lines.append(f"{measure:10} {_f(c['mean_a'])} {_f(c['mean_b'])} {_f(c['difference'], '+')} {_ci(c)} "
                     f"{c['wins']:5d} {c['losses']:6d} {c['ties']:5d} {_p(c['t_test_p'])} {_p(c['randomisation_p'])}")
    exact = any(c["permutations"] == 0 for c in result["measures"].values())
    sampled = ("every sign pattern enumerated" if exact
               else str(result["permutations"]) + " sign flips, seed " + str(result["seed"]))
    lines.append(
        f"(wins: A higher on a query; two-sided p-values; randomisation: "
        f"{sampled}; "
        f"CI: paired bootstrap of the queries, seed {result['seed']})"
    )
    diff = result["largest_differences"]
    for side, name in (("a_better", "A"), ("b_better", "B")):
        if diff[side]:
            lines.append(
                f"largest {diff['measure']} gains of {name}: "
                + ", ".join(f"{d['query']} ({d['a']:.3f} vs {d['b']:.3f})" for d in diff[side])
            )
    notices = dict.fromkeys(run["simulation"].get("notice", "") for run in (a, b) if "simulation" in run)
    lines += [f"[SIMULATED] {notice}" for notice in notices]
    return "\n".join(lines)


def _queries_line(result: dict) -> str:
    q = result["queries"]
    only = q["a"] + q["b"] - 2 * q["both"]
    return (f"{result['dataset']}: every number is over the {q['both']} judged queries both runs answer (A "
            f"answers {q['a']}, B {q['b']}{f'; the {only} only one answers are left out' if only else ''})")


def _f(value, sign: str = "") -> str:
    return f"{'—':>8}" if value is None else f"{value:{sign}8.4f}"


def _ci(c: dict) -> str:
    if c["ci_low"] is None:
        return f"{'—':>19}"
    return f"{'[' + format(c['ci_low'], '+.4f') + ', ' + format(c['ci_high'], '+.4f') + ']':>19}"


def _p(value) -> str:
    if value is None:
        return f"{'—':>9}"
    return f"{'<0.0001':>9}" if value < 1e-4 else f"{value:9.4f}"


@dataclass(frozen=True)
class CompareArguments:
    """``garen-infer compare``'s arguments (the CLI parses them; a script may build them)."""

    run_a: str  # a finished run folder, or a TREC run file from any system
    run_b: str  # another run folder or TREC run file on the same dataset
    dataset: str  # the dataset both runs used, for its judgements
    allow_empty_docs: bool = False
    measures: tuple[str, ...] = ("nDCG@10", "R@100")
    permutations: int = 10_000  # sign flips of the randomisation test
    seed: int = 0
    json: bool = False  # print the comparison as JSON


def main(args: CompareArguments) -> int:
    from garen_infer.data import load_judgments
    from garen_infer.evaluation.evaluate import measure_names

    measures = measure_names(list(args.measures))  # a typo is refused before the data loads
    dataset = load_judgments(args.dataset)  # queries and judgements: runs are scored without the corpus
    result = compare_runs(args.run_a, args.run_b, dataset, measures, args.permutations, args.seed)
    print(json.dumps(result, indent=2) if args.json else format_comparison(result))
    return 0
