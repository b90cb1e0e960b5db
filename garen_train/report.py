"""``garen-train report --logs DIR``: a training job's report, in the same folder style as ``garen-infer bench``:

    report.md, report.html   curves and tables (the HTML has its figures inlined)
    figures/loss.png         every logged metric with "loss" in its name, against the training step
    figures/evaluation.png   every validation / test metric (val/auc, val/R@20, ...) against the step
    figures/other.png        anything else the job logged (learning rates, ...)
    results.json             the final value of every logged metric, the before/after table, the provenance
    config/                  the job's config.yaml / hparams.yaml as Lightning saved them

``--before`` and ``--after`` put two sets of figures side by side, e.g. the zero-shot navigator against the
fine-tuned one: each is a JSON file (``garen-train evaluate`` output, an export's manifest) or a log folder (its
last validation values). ``--after`` defaults to the job's own last validation values. Both must be measured on
the same queries (``garen-train evaluate --held-out`` scores the job's validation split) for the change to mean
anything.

    garen-train evaluate --pairs mined/scifact-train/groups.jsonl --held-out --model '{backend: ...}' > zero-shot.json
    garen-train report --logs runs/train/navigator --before zero-shot.json --before-label zero-shot
        --after-label fine-tuned
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
from pathlib import Path

from garen_infer.report.document import Cell, Code, Document, Figure, Heading, Paragraph, Table
from garen_infer.report.provenance import provenance
from garen_infer.storage.atomic import atomic_path
from garen_train.training_logs import LoggedRun, bare_name, is_evaluation, read_logs, read_metrics_source

KIND = "garen-training-report"
HEADLINE = ("auc", "R@20", "nDCG@10")  # navigator: ranking of gold groups; gold-group recall among K_g = 20 scored
SMOOTH_ABOVE = 30  # points; noisier step-level curves get a running mean drawn over them


def group_of(metric: str) -> str:
    if "loss" in metric.lower():
        return "loss"
    return "evaluation" if is_evaluation(metric) else "other"


def plot_group(runs: list[LoggedRun], group: str, path: Path) -> str | None:
    from garen_infer.report.figures import plt, save, styles

    metrics = sorted({m for r in runs for m in r.series if group_of(m) == group}, key=_headline_first)
    if not metrics:
        return None
    columns = min(3, len(metrics))
    rows = math.ceil(len(metrics) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 3.3 * rows), squeeze=False)
    style = styles([r.name for r in runs])
    for ax, metric in zip(axes.flat, metrics):
        for run in runs:
            points = run.series.get(metric)
            if not points:
                continue
            steps, values = [p[0] for p in points], [p[1] for p in points]
            label = run.name if len(runs) > 1 else None
            if len(points) > SMOOTH_ABOVE:
                ax.plot(steps, values, color=style[run.name]["color"], alpha=0.3, linewidth=0.8)
                ax.plot(steps, _running_mean(values), color=style[run.name]["color"], linewidth=1.6, label=label)
            else:
                ax.plot(steps, values, color=style[run.name]["color"], marker=style[run.name]["marker"],
                        markersize=4, label=label)
        ax.set_title(metric, fontsize=10)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        if len(runs) > 1:
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    fig.tight_layout()
    save(fig, path)
    what = {"loss": "Losses", "evaluation": "Validation and test metrics", "other": "Other logged values"}[group]
    smooth = f" Curves with more than {SMOOTH_ABOVE} points are drawn faint, with a running mean over them." if any(
        len(r.series.get(m, [])) > SMOOTH_ABOVE for r in runs for m in metrics) else ""
    return f"{what} against the training step: {', '.join(metrics)}.{smooth}"


def _running_mean(values: list[float], window: int = 10) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def _headline_first(metric: str) -> tuple:
    bare = bare_name(metric)
    return (HEADLINE.index(bare) if bare in HEADLINE else len(HEADLINE), metric)


def before_after_table(before: dict[str, float], after: dict[str, float], before_label: str, after_label: str) -> Table:
    names = sorted(set(before) | set(after), key=_headline_first)
    rows: list[list[Cell | str]] = []
    for name in names:
        b, a = before.get(name), after.get(name)
        change = Cell(f"{a - b:+.4f}") if a is not None and b is not None else Cell("—")
        rows.append([name, _value(b), _value(a), change])
    return Table(["metric", before_label, after_label, "change"], rows,
                 f"{before_label} against {after_label} (AUC: how often a gold item outscores a non-gold one "
                 f"of the same query; R@20: recall of gold items among the 20 best scored, GAREN's K_g).")


def _value(v) -> Cell:
    return Cell("—") if v is None else Cell(f"{v:.4f}")


def write_training_report(logs: Path, out: Path, before: Path | None = None, after: Path | None = None,
                          before_label: str = "before", after_label: str = "after", command: str = "") -> Path:
    runs = read_logs(logs)
    facts = provenance()
    after_values = (
        read_metrics_source(after)
        if after
        else {bare_name(k): v for k, v in runs[-1].final().items() if is_evaluation(k)}
    )
    before_values = read_metrics_source(before) if before else None
    configs = sorted(p for name in ("config.yaml", "hparams.yaml") for p in (logs.rglob(name) if logs.is_dir() else []))
    with atomic_path(out) as tmp:
        (tmp / "figures").mkdir(parents=True)
        doc = Document(f"Training report: {logs}")
        doc.add(Paragraph(
            "Logs read: "
            f"{', '.join(f'`{r.name}` ({r.source}, {sum(len(p) for p in r.series.values())} points)' for r in runs)}. "
            f"Machine: {facts['machine'].get('processor')}, {facts['machine'].get('cpu_count')} cores"
            f"{', GPUs: ' + ', '.join(facts['machine']['gpus']) if facts['machine'].get('gpus') else ''}."))
        doc.add(Heading("Curves"))
        for group in ("loss", "evaluation", "other"):
            caption = plot_group(runs, group, tmp / "figures" / f"{group}.png")
            if caption:
                doc.add(Figure(tmp / "figures" / f"{group}.png", caption))
        doc.add(Heading("Final values"))
        if before_values is not None:
            doc.add(before_after_table(before_values, after_values, before_label, after_label))
        final_rows: list[list[Cell | str]] = [[f"{r.name}: {m}" if len(runs) > 1 else m,
                                               Cell(str(r.series[m][-1][0])), _value(r.series[m][-1][1]),
                       _value(max(v for _, v in r.series[m])), _value(min(v for _, v in r.series[m]))]
                      for r in runs for m in sorted(r.series, key=_headline_first)]
        doc.add(Table(["metric", "last step", "last value", "max", "min"], final_rows,
                      "Every logged metric: its last value, and its extremes over training."))
        doc.add(Heading("Provenance"))
        if configs:
            (tmp / "config").mkdir()
            for i, path in enumerate(configs):
                target = tmp / "config" / f"{i}-{path.parent.name}-{path.name}"
                shutil.copy2(path, target)
                doc.add(Paragraph(f"`{path}` (copied to `config/{target.name}`):"),
                        Code(path.read_text(encoding="utf-8"), "yaml"))
        doc.add(Paragraph(f"Command: `{command or 'garen-train report --logs ' + str(logs)}`. Package "
                          "versions and machine:"),
                Code(json.dumps(facts, indent=2), "json"))
        doc.write(tmp)
        results = {
            "kind": KIND,
            "logs": str(logs),
            "runs": [{"name": r.name, "source": r.source, "final": r.final()} for r in runs],
            "before": {"source": str(before), "label": before_label, "values": before_values}
            if before_values is not None
            else None,
            "after": {
                "source": str(after) if after else "last validation values of the logs",
                "label": after_label,
                "values": after_values,
            },
            "provenance": facts,
        }
        (tmp / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out


def main(argv: list[str]) -> int:
    import shlex

    from garen_infer.errors import GarenError

    parser = argparse.ArgumentParser(prog="garen-train report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logs", required=True,
                        help="the job's log folder (trainer.default_root_dir or a logger's save_dir), or a metrics.csv")
    parser.add_argument("--out", help="the report folder (default: <logs>/report); replaced as a whole")
    parser.add_argument("--before",
                        help="figures to compare against: a JSON file (garen-train evaluate, an export "
                        "manifest) or a log folder")
    parser.add_argument("--after", help="the figures to compare (default: the last validation values in --logs)")
    parser.add_argument("--before-label", default="before")
    parser.add_argument("--after-label", default="after")
    args = parser.parse_args(argv)
    logs = Path(args.logs)
    out = Path(args.out) if args.out else (logs.parent if logs.is_file() else logs) / "report"
    if out.exists() and any(out.iterdir()) and not _is_report(out):
        raise GarenError(f"{out}: exists and is not a training report; choose another --out")
    command = "garen-train report " + " ".join(shlex.quote(a) for a in argv)
    write_training_report(logs, out, Path(args.before) if args.before else None,
                          Path(args.after) if args.after else None,
                          args.before_label, args.after_label, command)
    print(f"training report written to {out}")
    return 0


def _is_report(folder: Path) -> bool:
    try:
        return json.loads((folder / "results.json").read_text()).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False
