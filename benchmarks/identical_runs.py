"""Do the run files of every method rank alike before and after a change of the code?

    .venv/bin/python benchmarks/identical_runs.py --before REV [--methods bm25 rerank ...] [--budget 10]
        [--models cpu-default oracle] [--bytes] [--write-rankings tests/fixtures/rankings]

Exports REV (any commit, e.g. the one before a refactoring) with ``git archive``, and in that copy and in
this checkout, each with its own code on the path: writes the tests' tiny BEIR corpus, indexes it with the
cpu-default preset (every stage it names), and runs each method without the response cache, once per model set:
``cpu-default`` (the preset's own models) and ``oracle`` (the simulated reranker and navigator, sigma 0.3, seed
7). Prints one row per (models, method): ``identical`` (byte for byte), ``same order`` (every (query, document,
rank) line alike, the scores not: e.g. against a commit from before run.trec carried the methods' own scores), or
``DIFFERS``; and the run file's lines. Exit status 1 when a ranking differs (with ``--bytes``: when a file
differs) or a command failed. Methods whose models cpu-default does not set (repair, rarg) are left out unless
named. ``--write-rankings DIR`` keeps REV's rankings (query, document, rank; not the score column) as
``DIR/<models>/<method>.tsv``, the files tests/project/test_rankings_unchanged.py compares every method with;
write them with ``--set index.embeddings.precision=f32``, as the tests index (bf16 vectors, the preset's, move
with the CPU, and near-ties with them).
"""

from __future__ import annotations

import argparse
import filecmp
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("bm25", "rerank", "slidegar", "garen", "rgs", "lattice", "lattice++")
ORACLE = {"backend": "oracle", "sigma": 0.3, "seed": 7}
MODEL_SETS = {"cpu-default": None,
              "oracle": {"extends": "cpu-default", "models": {"reranker": ORACLE, "navigator": ORACLE}}}


def export(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def run_all(
    code: Path, work: Path, methods: list[str], budget: int, models: list[str], settings: tuple[str, ...] = ()
) -> dict[tuple[str, str], Path | None]:
    """Index the tiny corpus and run each method with each model set and the code in ``code``: each run file, or
    None."""
    env = {**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1"}

    def garen_infer(*args: str, log: Path) -> bool:
        with log.open("w") as out:
            return subprocess.run([sys.executable, "-m", "garen_infer", *args], cwd=code, env=env, stdout=out,
                                  stderr=subprocess.STDOUT).returncode == 0

    work.mkdir(parents=True)
    corpus = work / "tiny"
    write = f"import sys; sys.path[:0] = ['tests']; import conftest; conftest.write_beir({str(corpus)!r})"
    subprocess.run([sys.executable, "-c", write], cwd=code, env=env, check=True)
    dataset = f"beir:{corpus}"
    cells = [(m, method) for m in models for method in methods]
    index_settings = [option for setting in settings for option in ("--set", setting)]
    if not garen_infer("index", "--dataset", dataset, "--out", str(work / "index"), *index_settings,
                       log=work / "index.log"):
        return dict.fromkeys(cells)
    runs = {}
    for name, method in cells:
        out = work / "runs" / name / method
        preset = MODEL_SETS[name]
        if preset is None:
            chosen = "cpu-default"
        else:
            chosen = str(work / f"{name}.yaml")
            Path(chosen).write_text(json.dumps(preset))  # JSON is YAML
        options = ["--preset", chosen, "--method", method, "--budget", str(budget), "--no-cache", "--out", str(out)]
        done = garen_infer("run", "--dataset", dataset, "--index", str(work / "index"), *options,
                           log=work / f"{name}-{method}.log")
        runs[name, method] = out / "run.trec" if done else None
    return runs


def rankings(run_file: Path) -> str:
    """A run file's order (query, document, rank), without the score column a change may rescale."""
    rows = (line.split() for line in run_file.read_text().splitlines() if line.strip())
    return "".join(f"{qid}\t{doc}\t{rank}\n" for qid, _, doc, rank, *_ in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="the commit to compare this checkout against")
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--budget", type=int, default=10)
    parser.add_argument("--models", nargs="+", default=list(MODEL_SETS), choices=list(MODEL_SETS))
    parser.add_argument("--write-rankings", type=Path, metavar="DIR", help="keep the rankings of --before in DIR")
    parser.add_argument("--bytes", action="store_true", help="require identical files, scores included")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an index setting of both builds; the fixtures are written with "
                             "index.embeddings.precision=f32, as the tests index")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="identical-runs-") as tmp:
        work = Path(tmp)
        settings = tuple(args.set)
        before = run_all(export(args.before, work / "code"), work / "before", args.methods, args.budget, args.models,
                         settings)
        after = run_all(ROOT, work / "after", args.methods, args.budget, args.models, settings)
        print(f"{'models':<12} {'method':<12} {'run file':<10} lines")
        same = True
        for (name, method), old in before.items():
            new = after[name, method]
            if old is None or new is None:
                side = "before" if old is None else "after"
                verdict, lines = f"FAILED {side}", "-"
                log = work / side / (f"{name}-{method}.log" if (work / side / "index").exists() else "index.log")
                print(*log.read_text().splitlines()[-5:], sep="\n", file=sys.stderr)
            else:
                verdict = "identical" if filecmp.cmp(old, new, shallow=False) else (
                    "same order" if rankings(old) == rankings(new) else "DIFFERS")
                lines = str(len(new.read_text().splitlines()))
            if args.write_rankings and old is not None:
                target = args.write_rankings / name / f"{method}.tsv"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(rankings(old))
            same &= verdict == "identical" or (verdict == "same order" and not args.bytes)
            print(f"{name:<12} {method:<12} {verdict:<10} {lines}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
