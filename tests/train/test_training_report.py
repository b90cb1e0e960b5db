"""``garen-train report``: curves and before/after figures from what Lightning's own loggers write, whatever the
metrics are called."""

from __future__ import annotations

import json

import pytest

from garen_infer.errors import GarenError
from garen_train.cli import main
from garen_train.training_logs import read_logs, read_metrics_source

PNG = b"\x89PNG\r\n\x1a\n"


def write_logs(root, loggers=("csv", "tensorboard"), steps=40, version=None):
    """A job's logs through Lightning's CSVLogger and TensorBoardLogger: a step-level training loss, and
    validation metrics (navigator-style names) every 10 steps."""
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    made = []
    if "csv" in loggers:
        made.append(CSVLogger(str(root), name="csv", version=version))
    if "tensorboard" in loggers:
        made.append(TensorBoardLogger(str(root), name="tensorboard", version=version))
    for logger in made:
        for step in range(steps):
            logger.log_metrics({"train/loss": 1.0 / (1 + step), "lr-AdamW": 1e-4 * (1 - step / steps)}, step=step)
            if step % 10 == 9:
                logger.log_metrics({"val/loss": 0.5 / (1 + step), "val/auc": 0.6 + step / 200,
                                    "val/R@20": 0.3 + step / 100}, step=step)
        logger.save()
        logger.finalize("success")
    return root


def test_csv_and_tensorboard_logs_read_the_same(tmp_path):
    csv_runs = read_logs(write_logs(tmp_path / "a", loggers=("csv",)))
    tb_runs = read_logs(write_logs(tmp_path / "b", loggers=("tensorboard",)))
    assert [r.source for r in csv_runs] == ["csv"] and [r.source for r in tb_runs] == ["tensorboard"]
    csv_series, tb_series = csv_runs[0].series, tb_runs[0].series
    assert set(csv_series) == set(tb_series) == {"train/loss", "lr-AdamW", "val/loss", "val/auc", "val/R@20"}
    for name in csv_series:
        assert [s for s, _ in csv_series[name]] == [s for s, _ in tb_series[name]]
        assert [v for _, v in csv_series[name]] == pytest.approx([v for _, v in tb_series[name]], rel=1e-6)
    assert csv_runs[0].final()["val/auc"] == pytest.approx(0.6 + 39 / 200)
    # both loggers in one folder: the CSV is read, not the same numbers twice
    both = read_logs(write_logs(tmp_path / "c"))
    assert [r.source for r in both] == ["csv"]


def test_metrics_sources(tmp_path):
    (tmp_path / "evaluate.json").write_text(json.dumps({"pairs_file": "x",
                                                        "metrics": {"auc": 0.61, "R@20": 0.4, "pairs": 100}}))
    (tmp_path / "manifest.json").write_text(json.dumps({"family": "cross-encoder", "validation": {"auc": 0.8}}))
    assert read_metrics_source(tmp_path / "evaluate.json") == {"auc": 0.61, "R@20": 0.4, "pairs": 100.0}
    assert read_metrics_source(tmp_path / "manifest.json") == {"auc": 0.8}
    logs = write_logs(tmp_path / "logs", loggers=("csv",))
    assert read_metrics_source(logs) == pytest.approx({"loss": 0.5 / 40, "auc": 0.6 + 39 / 200, "R@20": 0.3 + 39 / 100})
    (tmp_path / "empty").mkdir()
    with pytest.raises(GarenError, match="no logged metrics"):
        read_logs(tmp_path / "empty")


def test_report_folder(tmp_path, capsys):
    logs = write_logs(tmp_path / "job")
    write_logs(tmp_path / "job", loggers=("csv",), steps=20, version=1)  # a second fit: its own series
    (tmp_path / "job" / "csv" / "version_0" / "config.yaml").write_text("model:\n  class_path: x.Y\n")
    before = tmp_path / "zero-shot.json"
    before.write_text(json.dumps({"metrics": {"auc": 0.55, "R@20": 0.25}}))
    assert main(["report", "--logs", str(logs), "--before", str(before), "--before-label", "zero-shot",
                 "--after-label", "fine-tuned"]) == 0
    report = logs / "report"
    assert sorted(p.name for p in (report / "figures").glob("*.png")) == ["evaluation.png", "loss.png", "other.png"]
    from matplotlib.image import imread

    for png in (report / "figures").glob("*.png"):
        assert png.read_bytes().startswith(PNG) and imread(png).std() > 0
    text = (report / "report.md").read_text()
    assert "| auc | 0.5500 | 0.6950 | +0.1450 |" in text  # the last validation of the latest series (version_1)
    assert "| R@20 | 0.2500 | 0.4900 | +0.2400 |" in text
    assert "class_path: x.Y" in text and (report / "config").is_dir()
    results = json.loads((report / "results.json").read_text())
    assert [r["name"] for r in results["runs"]] == ["csv/version_0", "csv/version_1"]
    assert results["before"]["values"]["auc"] == 0.55 and results["after"]["values"]["auc"] == pytest.approx(0.695)
    assert "data:image/png;base64," in (report / "report.html").read_text()
    # again: the report folder is replaced, and is not mistaken for logs
    assert main(["report", "--logs", str(logs)]) == 0
    assert "zero-shot" not in (report / "report.md").read_text()


def test_bad_input_is_one_line(tmp_path, capsys):
    assert main(["report", "--logs", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.strip().startswith("garen-train report: error: ")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("x")
    logs = write_logs(tmp_path / "job", loggers=("csv",))
    assert main(["report", "--logs", str(logs), "--out", str(tmp_path / "other")]) == 2
    assert "is not a training report" in capsys.readouterr().err and (tmp_path / "other" / "keep.txt").exists()
