"""Read a Lightning job's logged metrics, whatever they are called: CSVLogger's ``metrics.csv`` (one column per
metric, a row per logging step, empty where a metric was not logged at that step) and TensorBoard event files.

A job that logs to both writes the same numbers twice; the CSV files are read when there are any, the event files
otherwise. Each ``version_N`` folder (a new ``fit``, or a resumed one) is its own series.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from garen_infer.errors import GarenError

NOT_METRICS = {"epoch", "step"}  # the x axes Lightning writes next to the metrics
STAGE_PREFIXES = ("val/", "validation/", "valid/", "test/", "val_", "test_")


@dataclass
class LoggedRun:
    name: str  # the log folder, relative to the root that was read
    source: str  # "csv" or "tensorboard"
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # metric -> (step, value), by step

    def final(self) -> dict[str, float]:
        return {name: points[-1][1] for name, points in self.series.items() if points}


def read_logs(root: str | Path) -> list[LoggedRun]:
    root = Path(root)
    if not root.exists():
        raise GarenError(f"{root}: no such log folder")
    csv_files = [root] if root.is_file() else sorted(root.rglob("metrics.csv"), key=_natural)
    if csv_files:
        runs = [read_csv(path, _name(path.parent, root)) for path in csv_files]
    else:
        folders = sorted({p.parent for p in root.rglob("events.out.tfevents.*")}, key=_natural)
        runs = [read_tensorboard(folder, _name(folder, root)) for folder in folders]
    runs = [r for r in runs if r.series]
    if not runs:
        raise GarenError(f"{root}: no logged metrics found (no metrics.csv from CSVLogger, no TensorBoard event files)")
    return runs


def _natural(path: Path) -> list:
    """version_2 before version_10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.as_posix())]


def _name(folder: Path, root: Path) -> str:
    if root.is_file():
        return folder.name
    rel = folder.relative_to(root).as_posix()
    return rel if rel != "." else root.name


def read_csv(path: Path, name: str) -> LoggedRun:
    run = LoggedRun(name, "csv")
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        for line_no, row in enumerate(reader, start=2):
            try:
                step = int(float(row.get("step") or 0))
            except ValueError:
                raise GarenError(f"{path}, line {line_no}: step '{row.get('step')}' is not a number") from None
            for metric, value in row.items():
                if metric in NOT_METRICS or metric is None or value in ("", None):
                    continue
                try:
                    number = float(value)
                except ValueError:
                    continue  # a text column (Lightning writes none, but a user's logger may)
                if math.isfinite(number):
                    run.series.setdefault(metric, []).append((step, number))
    for points in run.series.values():
        points.sort(key=lambda p: p[0])
    return run


def read_tensorboard(folder: Path, name: str) -> LoggedRun:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})  # 0: keep every point
    accumulator.Reload()
    run = LoggedRun(name, "tensorboard")
    for tag in accumulator.Tags().get("scalars", []):
        if tag in NOT_METRICS:
            continue
        points = sorted((e.step, float(e.value)) for e in accumulator.Scalars(tag) if math.isfinite(e.value))
        if tag == "hp_metric" and points == [(0, -1.0)]:
            continue  # TensorBoardLogger's placeholder when no hyperparameter metric was set
        if points:
            run.series[tag] = points
    return run


def bare_name(metric: str) -> str:
    """``val/auc`` -> ``auc``: logged names and an evaluation file's names meet without their stage prefix."""
    for prefix in STAGE_PREFIXES:
        if metric.startswith(prefix):
            return metric[len(prefix):]
    return metric


def is_evaluation(metric: str) -> bool:
    return metric != bare_name(metric)


def read_metrics_source(path: str | Path) -> dict[str, float]:
    """Numbers to put side by side: a JSON file (``garen-train evaluate``'s output, an export manifest with its
    ``validation`` figures, or a flat mapping), or a log folder / metrics.csv (the last logged value of each
    validation metric of its latest series). Names lose their stage prefix."""
    path = Path(path)
    if path.is_file() and path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as err:
            raise GarenError(f"{path}: not valid JSON ({err})") from None
        for key in ("metrics", "validation"):
            if isinstance(data, dict) and isinstance(data.get(key), dict):
                data = data[key]
                break
        if not isinstance(data, dict):
            raise GarenError(f"{path}: expected a mapping of metric names to numbers")
        return {
            bare_name(k): float(v)
            for k, v in data.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
    runs = read_logs(path)
    final = runs[-1].final()
    values = {bare_name(k): v for k, v in final.items() if is_evaluation(k)}
    if not values:
        raise GarenError(f"{path}: the logs hold no validation or test metrics (names starting with val/ or test/)")
    return values
