"""``garen-infer bench --config FILE``: run every (dataset, method, budget) cell of a bench file as an ordinary
resumable run folder, then write the comparison report.

Each cell is ``garen-infer run`` with the cell's preset, method and budget into ``<runs>/<dataset>/<label>@<budget>``:
a finished cell is only read again, an interrupted one resumes, and model answers come from the response cache,
so the same command run twice makes no model call the second time. Every cell is planned (method options, index
stages, models) before the first one runs, so a typo in the last entry does not surface after hours of work.

On a cluster the cells are independent jobs: ``--plan`` prints one command per cell (``--plan slurm``: an array job
script), ``--cell K`` runs cell K alone (no other cell's process is needed, none is waited for), and ``--collect``
writes the report from the cells that are finished, listing the others with the command that runs them. Cells
are numbered 1.. in the bench file's order (datasets, then methods, then budgets), from the file alone.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tqdm.auto import tqdm

from garen_infer.configuration.run_config import RunConfig, takes_budget
from garen_infer.errors import GarenError
from garen_infer.report.bench_config import BenchConfig, DatasetEntry, MethodEntry
from garen_infer.report.matrix import DatasetMatrix, Skipped
from garen_infer.report.run_results import TIMING_LOG, RunResult
from garen_infer.storage.append_log import read_finished

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.index.folder import IndexFolder


@dataclass
class CellPlan:
    entry: MethodEntry
    budget: int | None  # the resolved budget; None for a method without one
    folder: Path
    run_config: RunConfig
    problem: str | None = None  # why it cannot run here (a model or index stage it lacks)
    optional: bool = False  # the problem is a role the preset has no model for, in a method 'all' brought in


@dataclass
class BenchOutcome:
    report: Path
    queries_run: int  # queries answered by this invocation (0 when everything was already done)
    model_calls: int  # model calls those queries made (cache hits excluded)


def run_bench(
    config: BenchConfig, cache, limit: int | None = None, log=print, command: str = "", collect: bool = False
) -> BenchOutcome:
    """Plan every cell, run the ones not finished, write the report; ``limit`` (smoke runs) keeps its run folders
    and its report apart from the full bench's (suffix ``.first<N>``). ``collect``: run nothing, report the
    finished cells and list the others as not finished."""
    from garen_infer.methods.base import METHODS
    from garen_infer.report.write import check_report_folder, write_report

    check_report_folder(config.report, config.runs)  # before hours of runs, not after
    check_runs_folder(config)
    if limit:  # the smoke run's folders are not the ones the bench file names: said before anything runs
        log(smoke_line(config, limit))
    entries = config.method_entries(list(METHODS))
    presets = {e.label: _preset(config, e) for e in entries}
    prepared = [_prepare_dataset(config, d, entries, presets, limit, log) for d in config.datasets]
    problems = [f"{d.name} {p.entry.label}{'' if p.budget is None else '@' + str(p.budget)}: {p.problem}"
                for d, _, _, plans in prepared for p in plans if p.problem and not p.optional]
    if problems and not config.skip_unavailable:
        raise GarenError(f"{config.path}: {len(problems)} cell(s) cannot run ({'; '.join(problems)}); fix them, or set "
                         f"skip_unavailable: true to list them in the report instead")
    queries_run = model_calls = 0
    matrices = []
    if collect:
        for number, plan in enumerate((p for *_, plans in prepared for p in plans), start=1):
            if not plan.problem and not (plan.folder / "metrics.json").is_file():
                plan.problem = f"not finished: run it with --cell {number}"
    runnable = [p for *_, plans in prepared for p in plans if not p.problem]
    finished = sum((p.folder / "metrics.json").is_file() for p in runnable)  # re-read only: left out of the ETA
    cells = tqdm(total=len(runnable), initial=finished, desc="bench", unit="cell")
    for entry, dataset, index, plans in prepared:
        matrix = DatasetMatrix(
            entry.name,
            dataset.name,
            len(dataset.documents),
            len(dataset.judged_queries()),
            str(index.path),
            labels=[e.label for e in entries] + list(entry.runs),
            budgets=sorted({p.budget for p in plans if p.budget is not None and not p.problem}),
            baseline=config.baseline,
            embedding_model=(index.manifest["stages"].get("embeddings") or {}).get("params", {}).get("model"),
            measures=config.measures,
            run_files=dict(entry.runs),
        )
        for plan in plans:
            if plan.problem:
                matrix.skipped.append(Skipped(plan.entry.label, plan.budget, plan.problem))
                continue
            if collect:
                continue
            done_before = (plan.folder / "metrics.json").is_file()
            cells.set_description(f"bench: {entry.name} "
                                  f"{plan.entry.label}{'' if plan.budget is None else f' @{plan.budget}'}")
            ran, calls = _run_cell(dataset, index, plan, cache, log)
            queries_run, model_calls = queries_run + ran, model_calls + calls
            cells.update(0 if done_before else 1)
            log(f"[bench] {entry.name} {plan.folder.name}: {ran} queries run now, {calls} model calls")
        matrices.append((matrix, dataset, index, plans))
    cells.close()
    if limit:
        config = replace(config, report=smoke_report(config.report, limit))
    report = write_report(config, matrices, log, command)
    log(f"[bench] {queries_run} queries run, {model_calls} model calls; report: {report}")
    return BenchOutcome(report, queries_run, model_calls)


def smoke_report(report: Path, limit: int) -> Path:
    """Where ``--limit N`` writes its report: beside the full one, named for the queries it is over."""
    return report.with_name(f"{report.name}.first{limit}")


def smoke_line(config: BenchConfig, limit: int) -> str:
    """The one line saying where a ``--limit`` run writes, and that the full bench's report is not touched."""
    return (f"[bench] --limit {limit}: a smoke run of the first {limit} judged queries of each dataset, kept "
            f"apart from the full bench: run folders {config.runs}/<dataset>/<cell>.first{limit}, report "
            f"{smoke_report(config.report, limit)} ({config.report} is left as it is)")


def check_runs_folder(config: BenchConfig) -> None:
    """Refuse a ``runs`` folder inside (or equal to) an index folder: cells written there would mix with, and be
    swept or replaced with, the index's stages."""
    runs = config.runs.resolve()
    indexes = {entry.index.resolve() for entry in config.datasets}
    for folder in (runs, *runs.parents):
        if folder in indexes or (folder / "manifest.json").is_file():
            raise GarenError(f"{config.path}: runs: {config.runs} is inside the index folder {folder}; "
                             f"put the run folders beside the indexes, e.g. runs: runs")


def cell_list(config: BenchConfig) -> list[tuple[DatasetEntry, MethodEntry, int | None]]:
    """Every cell of the bench file, in its numbering order (cell K is item K-1): from the file and the method
    registry alone, so every job computes the same numbers without loading any data."""
    from garen_infer.methods.base import METHODS

    return [
        (d, e, b)
        for d in config.datasets
        for e in config.method_entries(list(METHODS))
        for b in _budgets_of(config, e) or [None]
    ]


def run_one_cell(config: BenchConfig, number: int, cache, limit: int | None = None, log=print) -> int:
    """Run (or resume) cell ``number`` alone: only its dataset, index and models are loaded; no index is built
    (``--plan`` builds them before the cells are handed out). Returns the queries it ran now."""
    from garen_infer.data import load_dataset
    from garen_infer.index.folder import IndexFolder

    cells = cell_list(config)
    if not 1 <= number <= len(cells):
        raise GarenError(f"--cell {number}: {config.path} has cells 1 to {len(cells)} (see --plan)")
    dataset_entry, entry, budget = cells[number - 1]
    dataset = load_dataset(dataset_entry.spec, dataset_entry.allow_empty_docs)
    index = IndexFolder.open(dataset_entry.index, dataset)
    [plan] = _plan_cells(config, dataset_entry, entry, _preset(config, entry), index, limit, [budget])
    if plan.problem:
        if config.skip_unavailable:
            log(f"[bench] cell {number} ({dataset_entry.name} {plan.folder.name}) is listed, not run: {plan.problem}")
            return 0
        raise GarenError(f"cell {number} ({dataset_entry.name} {plan.folder.name}) cannot run: {plan.problem}")
    ran, calls = _run_cell(dataset, index, plan, cache, log)
    log(f"[bench] cell {number} of {len(cells)}, {dataset_entry.name} {plan.folder.name}: {ran} queries run "
        f"now, {calls} model calls")
    return ran


def plan_text(config: BenchConfig, command: str, slurm: bool = False, env: str | Path | None = None,
              cwd: Path | None = None) -> str:
    """One ``--cell K`` command per cell, then the ``--collect`` step; or an array job script doing the same that runs
    from a clean shell: it activates ``env`` (default: the Python environment planning it), changes to ``cwd``
    (default: the folder planning it), and logs under ``<runs>/slurm-logs`` (made here: Slurm does not make it)."""
    import shlex
    import sys

    cells = cell_list(config)
    labels = [f"{d.name} {e.label}{'' if b is None else '@' + str(b)}" for d, e, b in cells]
    if not slurm:
        lines = [f"{command} --cell {k}  # {label}" for k, label in enumerate(labels, start=1)]
        return "\n".join([*lines, f"{command} --collect  # the report, once the cells are done"]) + "\n"
    prefix = Path(env or sys.prefix).resolve()
    if not (prefix / "bin" / "garen-infer").is_file():
        raise GarenError(f"--env {prefix}: no bin/garen-infer there; pass the virtualenv or conda prefix "
                         "garen-ir is installed in")
    activate = prefix / "bin" / "activate"
    logs = config.runs.resolve() / "slurm-logs"
    logs.mkdir(parents=True, exist_ok=True)
    # the planning folder (the bench file's relative paths) and environment, in POSIX sh (--wrap runs /bin/sh)
    setup = [f"cd {shlex.quote(str((cwd or Path.cwd()).resolve()))}",
             f". {shlex.quote(str(activate))}" if activate.is_file()
             else f'export PATH={shlex.quote(str(prefix / "bin"))}:"$PATH"']
    collect = shlex.quote(" && ".join([*setup, f"{command} --collect"]))
    return "\n".join([
        "#!/bin/bash",
        "#SBATCH --job-name=garen-bench",
        f"#SBATCH --array=1-{len(cells)}",
        f"#SBATCH --output={logs}/garen-bench-%A_%a.log",
        "# add the partition, --gres=gpu:N, --time and --mem your cluster needs. A task that is cut off resumes",
        "# its run folder when it is submitted again (sbatch --array=K this-script).",
        *(f"#   cell {k}: {label}" for k, label in enumerate(labels, start=1)),
        "set -euo pipefail",
        *setup,  # the folder and environment it was planned from, whatever shell submits the job
        f'{command} --cell "$SLURM_ARRAY_TASK_ID"',
        "# the report, when every task has finished:",
        f"#   sbatch --dependency=afterany:<this array job id> --output={logs}/garen-bench-collect-%j.log "
        f"--wrap={collect}",
    ]) + "\n"


def _budgets_of(config: BenchConfig, entry: MethodEntry) -> tuple:
    from garen_infer.methods.base import get_method

    method_cls = get_method(entry.method)  # an unknown name is an error in the bench file, not a cell to skip
    if not takes_budget(method_cls):
        return ()
    return entry.budgets if entry.budgets is not None else config.budgets


def _preset(config: BenchConfig, entry: MethodEntry) -> dict:
    from garen_infer.configuration.presets import load_preset

    return load_preset(entry.preset or config.preset, [*config.overrides, *entry.overrides])


def _prepare_dataset(config: BenchConfig, entry: DatasetEntry, methods: list[MethodEntry], presets: dict, limit, log):
    from garen_infer.data import load_dataset
    from garen_infer.index.folder import IndexFolder

    dataset = load_dataset(entry.spec, entry.allow_empty_docs)
    if config.build_index:
        _build_index(dataset, entry, [presets[m.label] for m in methods], log)
    index = IndexFolder.open(entry.index, dataset)
    for file in entry.runs.values():  # another system's run: readable and made on this dataset, before any cell runs
        RunResult.load(file).check_dataset(dataset)
    plans = [p for m in methods for p in _plan_cells(config, entry, m, presets[m.label], index, limit)]
    return entry, dataset, index, plans


def _build_index(dataset: Dataset, entry: DatasetEntry, presets: list[dict], log) -> None:
    """``garen-infer index`` with every stage the cells' presets define; two presets that build the same stage
    with different params would rebuild it back and forth, so that is refused."""
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig
    from garen_infer.storage.writer_lock import writer_lock

    stages: dict[str, dict] = {}
    for preset in presets:
        for name, params in (preset.get("index") or {}).items():
            if name in stages and stages[name] != (params or {}):
                raise GarenError(f"index stage '{name}' has different params in two of the bench's presets; an index "
                                 "folder holds one version of a stage: use one preset's params, or another "
                                 "dataset entry")
            stages[name] = params or {}
    log(f"[bench] {entry.name}: index {entry.index}")
    with writer_lock(entry.index, "index folder"):  # as 'garen-infer index' does
        IndexFolder.build(dataset, entry.index, IndexConfig.from_dict(stages), log=log)


def _plan_cells(config: BenchConfig, dataset_entry: DatasetEntry, entry: MethodEntry, preset: dict,
                index: IndexFolder, limit, budgets=None) -> list[CellPlan]:
    """The entry's cells on this dataset, one per budget (``budgets``: only these; None stands for 'no
    budget'), planned from their configurations alone: no method is built, no index structure loaded."""
    from garen_infer.configuration.presets import run_config_from
    from garen_infer.running.runner import require_stages

    budgets = _budgets_of(config, entry) if budgets is None else budgets
    cell_limit = min(x for x in (entry.limit, limit) if x is not None) if entry.limit or limit else None
    plans = []
    for budget in budgets or [None]:  # no budgets: once, with the preset's
        run_config = run_config_from(preset, entry.method, budget, cell_limit)
        problem, resolved = None, run_config.budget
        try:
            require_stages(index, run_config)
        except GarenError as err:  # a missing index stage; a missing model, if any, is the first reason
            problem = str(err)
        missing = run_config.missing_roles()  # its options may drop a role (GAREN's connectivity navigator)
        if missing:
            problem = (
                f"preset '{entry.preset or config.preset}' sets no model for "
                f"{', '.join('models.' + r for r in missing)}"
            )
        name = entry.label if resolved is None else f"{entry.label}@{resolved}"
        folder = config.runs / dataset_entry.name / (name + (f".first{cell_limit}" if cell_limit else ""))
        plans.append(CellPlan(entry, resolved, folder, run_config, problem, optional=bool(missing) and entry.from_all))
    return plans


def _run_cell(dataset: Dataset, index: IndexFolder, plan: CellPlan, cache, log) -> tuple[int, int]:
    """Run (or resume, or only re-read) one cell; (queries answered now, model calls they made). Each cell opens
    the index and loads its models afresh, exactly as ``garen-infer run`` would: no cell inherits another's warm
    caches (query embeddings, group-summary vectors), so its seconds do not depend on the order cells ran in."""
    from garen_infer.index.folder import IndexFolder
    from garen_infer.running.session import Session

    trace = plan.folder / "trace.jsonl"
    before = set(read_finished(trace, "qid"))
    start = time.perf_counter()
    metrics = Session(dataset, IndexFolder.open(index.path, dataset), plan.run_config, cache, log=log).run(plan.folder)
    wall = time.perf_counter() - start
    records = read_finished(trace, "qid")
    new = [r for qid, r in records.items() if qid not in before]
    if new:  # the runner's wall time covers its query loop (not loading the dataset or the first stage)
        seconds = metrics.get("wall_seconds_per_query", wall / len(new)) * len(new)
        _append(plan.folder / TIMING_LOG,
                {"at": f"{time.time():.6f}", "queries": len(new), "wall_seconds": round(seconds, 4)})
    return len(new), sum(r["ledger"]["model_calls"] for r in new)


def _append(path: Path, record: dict) -> None:
    read_finished(path, "at")  # cuts a torn last line before appending
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


@dataclass(frozen=True)
class BenchArguments:
    """``garen-infer bench``'s arguments (the CLI parses them; a script may build them)."""

    config: str  # a bench file (configs/bench/)
    overrides: tuple[str, ...] = ()  # KEY=VALUE changes to the bench file, as --set takes them
    limit: int | None = None  # only the first N judged queries of each dataset: .firstN run folders and report
    cache: str | None = None  # the response cache file; None: the default one
    no_cache: bool = False
    plan: Literal["commands", "slurm"] | None = None  # print one command per cell, or an array job script
    env: str | None = None  # with plan "slurm": the environment prefix the jobs activate
    cell: int | None = None  # run this cell of the plan alone
    collect: bool = False  # run nothing: report the finished cells


def main(args: BenchArguments) -> int:
    """``garen-infer bench``."""
    import shlex
    import sys

    from garen_infer.llm.cache import NoCache, ResponseCache
    from garen_infer.report.bench_config import load_bench_config

    config = load_bench_config(args.config, args.overrides)
    check_runs_folder(config)  # every way in (plan, cell, the whole bench) writes cells there
    command = " ".join(["garen-infer bench --config", shlex.quote(str(args.config)),
                        *(f"--set {shlex.quote(o)}" for o in args.overrides),
                        *([f"--limit {args.limit}"] if args.limit else [])])
    cache_args = " --no-cache" if args.no_cache else f" --cache {shlex.quote(args.cache)}" if args.cache else ""
    if args.plan:
        if config.build_index:  # the cells only read the indexes: build them once, before they are handed out
            from garen_infer.methods.base import METHODS

            entries = config.method_entries(list(METHODS))
            presets = {e.label: _preset(config, e) for e in entries}
            for entry in config.datasets:
                _prepare_dataset(config, entry, entries, presets, args.limit, lambda *a: print(*a, file=sys.stderr))
        print(plan_text(config, command + cache_args, slurm=args.plan == "slurm", env=args.env), end="")
        return 0
    cache = NoCache() if args.no_cache else ResponseCache(args.cache)
    if args.cell:
        run_one_cell(replace(config, build_index=False), args.cell, cache, args.limit)
        return 0
    run_bench(replace(config, build_index=False) if args.collect else config, cache, args.limit,
              command=command, collect=args.collect)
    return 0
