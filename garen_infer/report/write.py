"""The bench report folder, written whole into a temporary sibling and then swapped in, so a reader never sees half
of an old report mixed with half of a new one:

    report.md, report.html   the report (the HTML has its figures inlined: one file to send or open)
    summary.md               setup and the main tables only (what benchmarks/bench_readme.py puts in the README)
    results.json             every number of the tables, each cell's resolved configuration, the provenance
    tables.tex               the accuracy and cost tables as LaTeX (booktabs), for a paper
    per_query.csv            dataset, method, budget, query id, then the bench's measures for every cell
    figures/*.png            accuracy against budget and against cost, reachability by distance, distance to gold
                             on the document and group graphs, a traversal case study (also as .pdf / .svg, as
                             the bench file's figure_formats say)
    bench.yaml               the bench file as it was given
"""

from __future__ import annotations

import csv
import json
from functools import partial
from pathlib import Path

from garen_infer.errors import GarenError
from garen_infer.llm.model_specs import backend_of
from garen_infer.report import figures, tables
from garen_infer.report.document import Code, Document, Figure, Heading, Paragraph, Table
from garen_infer.report.latex import document_latex
from garen_infer.report.matrix import Cell, collect, first_stage_provider, matrix_json, per_query_rows
from garen_infer.report.provenance import provenance
from garen_infer.report.run_results import RunResult
from garen_infer.report.traversal import traversal
from garen_infer.storage.atomic import atomic_path, remove_dead_writers_temporaries

KIND = "garen-bench-report"  # marks a folder this module may replace
SUMMARY_FIGURES = ("accuracy-vs-budget", "accuracy-vs-cost")  # the figures summary.md shows too


def write_report(config, prepared, log=print, command: str = "") -> Path:
    out = Path(config.report)
    check_report_folder(out, Path(config.runs))
    sections = []  # (matrix, dataset, index, first-stage rows)
    for matrix, dataset, index, plans in prepared:
        matrix.cells = [
            Cell(p.entry.label, p.entry.method, p.budget, RunResult.load(p.folder))
            for p in plans
            if not p.problem
        ]
        matrix.cells += [
            Cell(label, "run file", None, RunResult.load(file)) for label, file in matrix.run_files.items()
        ]
        first_stage_rows = first_stage_provider(index, dataset)
        collect(matrix, dataset, index, config.prices, config.significance, first_stage_rows)
        sections.append((matrix, dataset, index, first_stage_rows))
    matrices = [s[0] for s in sections]
    facts = provenance()
    command = command or f"garen-infer bench --config {config.path}"
    remove_dead_writers_temporaries(out)  # a report killed mid-write (a --collect stopped by its job's time limit)
    with atomic_path(out) as tmp:
        (tmp / "figures").mkdir(parents=True)
        doc, summary = Document("Method comparison"), Document("Method comparison")
        setup = _setup(config, matrices, facts, command)
        doc.add(*setup)
        summary.add(*setup)
        latex = []
        for matrix, dataset, index, first_stage_rows in sections:
            blocks = _dataset_section(matrix, tmp / "figures", config.significance.alpha, config.figure_formats,
                                      partial(traversal, matrix, dataset, index, first_stage_rows))
            doc.add(*blocks)
            latex += _latex_tables(matrix, config.significance.alpha)
            figures_shown = [b for b in blocks if isinstance(b, Figure) and b.path.stem.endswith(SUMMARY_FIGURES)]
            summary.add(*_summary_section(matrix, config.significance.alpha, figures_shown))
        if len(matrices) > 1:  # the paper's main table: methods by datasets, and the average
            across = [tables.datasets_table(matrices, m, config.significance.alpha) for m in config.measures]
            doc.add(Heading("Across datasets"), *across)
            summary.add(Heading("Across datasets", 3), *across)
            latex = [(t, f"tab:datasets-{_slug(m)}") for t, m in zip(across, config.measures)] + latex
        doc.add(Heading("Provenance"), Paragraph(f"Command: `{command}`. The bench file:"),
                Code(config.text or "", "yaml"),
                Paragraph("Package versions and machine:"), Code(json.dumps(facts, indent=2), "json"))
        doc.write(tmp)
        (tmp / "tables.tex").write_text(document_latex(latex), encoding="utf-8")
        summary.write(tmp, "summary")
        (tmp / "summary.html").unlink()  # the summary is for Markdown pages; report.html is the one to open
        results = {"kind": KIND, "command": command, "bench_file": str(config.path), "provenance": facts,
                   "significance": vars(config.significance), "measures": list(config.measures),
                   "prices": {r: vars(p) for r, p in config.prices.items()},
                   "datasets": {m.name: matrix_json(m) for m in matrices}}
        (tmp / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True, default=str) + "\n",
                                          encoding="utf-8")
        with open(tmp / "per_query.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(["dataset", "method", "budget", "query_id", *config.measures])
            writer.writerows(row for m in matrices for row in per_query_rows(m))
        (tmp / "bench.yaml").write_text(config.text or "", encoding="utf-8")
    log(f"[bench] report written to {out}")
    return out


def check_report_folder(out: Path, runs: Path) -> None:
    """The report folder is replaced as a whole: refuse a folder that is not an earlier report, or holds the runs."""
    resolved_runs, resolved_out = runs.resolve(), out.resolve()
    if resolved_runs == resolved_out or resolved_out in resolved_runs.parents:
        raise GarenError(f"report folder {out} would contain the run folders {runs}; put them side by side")
    if out.exists() and any(out.iterdir()):
        try:
            kind = json.loads((out / "results.json").read_text()).get("kind")
        except (OSError, ValueError, AttributeError):
            kind = None
        if kind != KIND:
            raise GarenError(f"{out}: exists and is not a bench report (no results.json of one); choose "
                             "another 'report' folder")


def _models_line(matrices) -> str:
    """Each role some cell used, with its model (embedding roles name the index's embedding model)."""
    seen: dict[str, None] = {}
    for matrix in matrices:
        for cell in matrix.cells:
            models = cell.run.config.get("models") or {}
            for role in cell.cost["roles"]:
                spec = dict(models.get(role) or {})
                if backend_of(spec) == "embedding":
                    text = (
                        f"{spec.get('model') or matrix.embedding_model or 'the index’s embedding model'} "
                        "embeddings (cosine)"
                    )
                else:
                    text = f"{spec.get('model', '?')} via {spec.get('backend')}" + (
                        f" ({spec['mode']})" if spec.get("mode") else ""
                    )
                seen[f"{role}: {text}"] = None
    return "; ".join(seen) or "none (no method used a model)"


def _setup(config, matrices, facts: dict, command: str) -> list:
    machine = facts["machine"]
    datasets = ", ".join(f"{m.name} ({m.dataset_name}: {m.judged_queries} judged queries, {m.documents:,} "
                         "documents)" for m in matrices)
    labels = list(dict.fromkeys(label for m in matrices for label in m.labels if m.row(label)))
    budgets = sorted({b for m in matrices for b in m.budgets})
    source = facts.get("source") or {}
    commit = (
        " at commit "
        f"`{source['commit'][:12]}`{' with uncommitted changes' if source.get('uncommitted_changes') else ''}"
        if source
        else ""
    )
    first_stages = {
        json.dumps(c.run.config.get("first_stage"), sort_keys=True)
        for m in matrices
        for c in m.cells
        if not c.run.external
    }
    run_files = [f"{label} ({m.name}: `{file}`)" for m in matrices for label, file in m.run_files.items()]
    lines = [
        f"**Datasets**: {datasets}.",
        f"**Methods**: {', '.join(labels)}. **Budgets** (Reranker@k, distinct documents the reranker may see): "
        f"{', '.join(map(str, budgets)) or 'the presets’'}. **Preset**: `{config.preset}`"
        f"{' with ' + ', '.join(f'`{o}`' for o in config.overrides) if config.overrides else ''}.",
        f"**Models**: {_models_line(matrices)}. **First stage**: {'; '.join(sorted(first_stages)) or 'none'}.",
        *([f"**Runs of other systems** (TREC run files; no budget, cost unknown): {', '.join(run_files)}."]
          if run_files else []),
        f"**Machine**: {machine.get('processor')}, {machine.get('cpu_count')} cores"
        f"{', GPUs: ' + ', '.join(machine['gpus']) if machine.get('gpus') else ', no GPU'}; Python "
        f"{machine.get('python')}. Produced by `{command}`{commit}.",
    ]
    simulated = {
        f"{m.name} {c.label}{'' if c.budget is None else '@' + str(c.budget)}": c.run.config[
            "simulation"
        ].get("notice", "")
        for m in matrices
        for c in m.cells
        if c.run.config.get("simulation")
    }
    if simulated:  # the oracle backend: such numbers must never pass for a model's (garen_infer/llm/oracle.py)
        lines.insert(0, f"**SIMULATED cells**: {', '.join(simulated)}. {' '.join(dict.fromkeys(simulated.values()))}")
    if config.baseline:
        sig = config.significance
        correction = (
            " The t-test marks are Holm-corrected within a fixed family per dataset and measure: the bench file's "
            "methods at every budget against the baseline; other systems' run files form a family apart, so "
            "adding one moves no method's marks. No marks where a measure's cutoff is above the budget "
            "(`significance.correction: none` for the paper's uncorrected test)."
            if sig.correction == "holm"
            else " No correction for multiple comparisons (`significance.correction: none`)."
        )
        lines.append(
            f"**Significance** against `{config.baseline}` at the same budget: paired t-test (as in the GAREN paper) "
            f"and a paired randomisation test ({sig.permutations:,} sign flips, seed {sig.seed}; exact enumeration up "
            f"to 16 queries), alpha {sig.alpha}; {1 - sig.alpha:.0%} confidence intervals of the "
            f"differences by a paired bootstrap ({sig.bootstrap:,} resamples of the queries).{correction}"
        )
    return [Heading("Setup"), Paragraph("  \n".join(lines))]


def _dataset_section(matrix, figures_dir: Path, alpha: float, formats, case_study) -> list:
    """One dataset's tables and figures; ``case_study(path, formats)`` draws its traversal figure (it needs
    the index)."""
    blocks: list = [Heading(matrix.name)]
    for measure in matrix.measures:
        blocks.append(tables.accuracy_table(matrix, measure, alpha))
    for name, draw in (("accuracy-vs-budget", figures.accuracy_vs_budget),
                       ("accuracy-vs-cost", figures.accuracy_vs_cost)):
        path = figures_dir / f"{matrix.name}-{name}.png"
        caption = draw(matrix, path, formats)
        if caption:
            blocks.append(Figure(path, caption))
    blocks.append(tables.cost_table(matrix))
    significance = tables.significance_table(matrix, matrix.measures[0])
    if significance is not None:
        blocks.append(significance)
    reach = tables.reachability_table(matrix)
    if reach is not None:
        blocks.append(reach)
    for name, draw in (("reachability", figures.reachability), ("gold-distance", figures.gold_distance),
                       ("traversal", lambda m, path, formats: case_study(path, formats))):
        path = figures_dir / f"{matrix.name}-{name}.png"
        caption = draw(matrix, path, formats)
        if caption:
            blocks.append(Figure(path, caption))
    if matrix.skipped:
        rows = [[s.label, "—" if s.budget is None else str(s.budget), s.reason] for s in matrix.skipped]
        blocks.append(Table(["method", "budget", "not run because"], rows,
                            f"Cells of {matrix.name} that were not run."))
    return blocks


def _summary_section(matrix, alpha: float, figures_shown: list) -> list:
    blocks: list = [Heading(matrix.name, 3)]
    for measure in matrix.measures:
        blocks.append(tables.accuracy_table(matrix, measure, alpha))
    blocks += figures_shown
    blocks.append(_method_costs(matrix))
    if matrix.skipped:
        blocks.append(Paragraph("Not run: " + "; ".join(f"{s.label}{'' if s.budget is None else '@' + str(s.budget)} "
                                                        f"({s.reason})" for s in matrix.skipped)))
    return blocks



def _method_costs(matrix) -> Table:
    """The cost table without its per-role lines (those are in the full report)."""
    cost = tables.cost_table(matrix)
    cost.rows = [r for r in cost.rows if not str(r[0]).startswith("  ↳")]
    return cost


def _latex_tables(matrix, alpha: float) -> list[tuple[Table, str]]:
    """The tables a paper takes: accuracy per measure and the cost per method, labelled tab:<dataset>-<what>."""
    out = [(tables.accuracy_table(matrix, m, alpha), f"tab:{_slug(matrix.name)}-{_slug(m)}") for m in matrix.measures]
    return out + [(_method_costs(matrix), f"tab:{_slug(matrix.name)}-cost")]


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name)
