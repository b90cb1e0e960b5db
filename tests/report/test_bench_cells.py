"""``garen-infer bench`` handing its cells out as independent jobs: ``--plan`` (commands or a Slurm array script),
``--cell K`` in any order and any process, and ``--collect`` reporting the finished cells and listing the rest."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import REPO, one_error_line

from garen_infer.doors.cli import main
from garen_infer.llm.cache import ResponseCache
from garen_infer.report.bench import run_bench
from garen_infer.report.bench_config import load_bench_config


def bench_file(tmp_path, beir_dir, index, name="bench.yaml") -> str:
    config = {"preset": "cpu-default", "budgets": [4, 8], "methods": ["bm25", "rerank"],
              "datasets": {"tiny": {"spec": f"beir:{beir_dir}", "index": str(index.path)}},
              "significance": {"permutations": 200}, "runs": str(tmp_path / "runs"), "report": str(tmp_path / "report")}
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_the_plan_is_one_command_per_cell_or_an_array_script(beir_dir, tiny_index, tmp_path, capsys):
    path = bench_file(tmp_path, beir_dir, tiny_index)
    assert main(["bench", "--config", path, "--set", "budgets=[4,8]", "--limit", "3", "--plan"]) == 0
    lines = capsys.readouterr().out.splitlines()
    command = f"garen-infer bench --config {path} --set 'budgets=[4,8]' --limit 3"
    assert lines == [f"{command} --cell 1  # tiny bm25", f"{command} --cell 2  # tiny rerank@4",
                     f"{command} --cell 3  # tiny rerank@8",
                     f"{command} --collect  # the report, once the cells are done"]
    assert main(["bench", "--config", path, "--plan", "slurm", "--cache", "c.sqlite"]) == 0
    script = capsys.readouterr().out
    assert script.startswith("#!/bin/bash\n") and "#SBATCH --array=1-3\n" in script
    assert f'garen-infer bench --config {path} --cache c.sqlite --cell "$SLURM_ARRAY_TASK_ID"\n' in script
    assert f"#SBATCH --output={tmp_path / 'runs' / 'slurm-logs'}/garen-bench-%A_%a.log\n" in script
    # planning runs nothing; Slurm needs the log folder
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["slurm-logs"]


def test_the_slurm_script_runs_a_cell_from_a_clean_shell_in_another_folder(
    beir_dir, tiny_index, tmp_path, capsys, monkeypatch
):
    """What a Slurm node gives a task: no activated environment, another working folder, the task id. The script
    activates the environment it was planned from and goes back to the folder it was planned in."""
    bench_file(tmp_path / "bench", beir_dir, tiny_index)
    monkeypatch.chdir(tmp_path / "bench")
    assert main(["bench", "--config", "bench.yaml", "--plan", "slurm", "--no-cache"]) == 0  # a path relative to here
    script = tmp_path / "job.sh"
    script.write_text(capsys.readouterr().out)
    assert f". {Path(sys.prefix).resolve() / 'bin' / 'activate'}\n" in script.read_text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    clean = {"SLURM_ARRAY_TASK_ID": "1", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
             "PYTHONPATH": str(REPO)}  # PYTHONPATH: this checkout's code, not the environment's install of it
    task = subprocess.run(["bash", str(script)], cwd=elsewhere, env=clean, capture_output=True, text=True, timeout=600)
    assert task.returncode == 0, task.stderr
    assert (tmp_path / "bench" / "runs" / "tiny" / "bm25" / "metrics.json").is_file() and not list(elsewhere.iterdir())

    assert main(["bench", "--config", "bench.yaml", "--plan", "slurm", "--env", str(tmp_path)]) == 2
    assert one_error_line(capsys, "garen-infer bench").endswith(
        f"--env {tmp_path}: no bin/garen-infer there; pass the virtualenv "
        f"or conda prefix garen-ir is installed in"
    )


FAKE_SLURM = REPO / "benchmarks" / "fake_slurm.py"


def fake_slurm(tmp_path) -> dict:
    """The stand-in `sbatch` and `srun` first on the PATH: jobs queue until `drain` runs them."""
    subprocess.run([sys.executable, str(FAKE_SLURM), "install", str(tmp_path / "bin")], check=True)
    return {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1",
            "FAKE_SLURM_DIR": str(tmp_path / "slurm"), "PYTHONPATH": str(REPO),
            "FAKE_SLURM_KEEP": "HF_HUB_OFFLINE,PYTHONPATH"}


def drain(env: dict) -> list[str]:
    """Run the queued jobs; the tasks in the order they ran, as 'JOB NAME task=K exit=CODE'."""
    done = subprocess.run([sys.executable, str(FAKE_SLURM), "drain"], env=env, capture_output=True, text=True,
                          timeout=900)
    order = (Path(env["FAKE_SLURM_DIR"]) / "order.log").read_text().splitlines()
    assert done.returncode == 0, (done.stderr, order)
    return [line.rsplit(" log=", 1)[0] for line in order]


def test_the_slurm_script_and_its_collect_job_run_on_a_stand_in_slurm(beir_dir, tiny_index, tmp_path, capsys,
                                                                      monkeypatch):
    """Submitted as docs/cluster.md says (the array, then its collect line depending on it) and run by a
    stand-in Slurm: bare shells in other folders, the last submitted job first, /bin/sh for --wrap. Both cells
    run, then the report holds both; the logs are under the runs folder."""
    config = yaml.safe_load(Path(bench_file(tmp_path / "bench", beir_dir, tiny_index)).read_text())
    config["datasets"]["again"] = config["datasets"]["tiny"]  # two cells of bm25, the quickest method to run
    config |= {"methods": ["bm25"], "figure_formats": ["png"]}
    (tmp_path / "bench" / "bench.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(tmp_path / "bench")
    assert main(["bench", "--config", "bench.yaml", "--plan", "slurm", "--no-cache"]) == 0
    script = tmp_path / "bench" / "bench.sh"
    script.write_text(capsys.readouterr().out)
    env = fake_slurm(tmp_path)
    submit = dict(env=env, capture_output=True, text=True, check=True)
    array = subprocess.run(["sbatch", "--parsable", str(script)], **submit).stdout.strip()
    [collect] = [line.removeprefix("#   ") for line in script.read_text().splitlines()
                 if line.startswith("#   sbatch --dependency")]
    subprocess.run(["bash", "-c", collect.replace("<this array job id>", array)], **submit)
    assert drain(env) == ["1000 garen-bench task=2 exit=0", "1000 garen-bench task=1 exit=0",
                          "1001 wrap task=None exit=0"]
    collected = json.loads((tmp_path / "bench" / "report" / "results.json").read_text())["datasets"]
    cells = {name: [c["label"] for c in d["cells"]] + d["skipped"] for name, d in collected.items()}
    assert cells == {"tiny": ["bm25"], "again": ["bm25"]}
    logs = tmp_path / "bench" / "runs" / "slurm-logs"
    assert sorted(p.name for p in logs.iterdir()) == ["garen-bench-1000_1.log", "garen-bench-1000_2.log",
                                                      "garen-bench-collect-1001.log"]


def test_the_stand_in_slurm_runs_a_job_without_its_dependency_too_early(tmp_path):
    """What makes the check above mean something: submitted without --dependency, the later job runs first."""
    env = fake_slurm(tmp_path)
    for job in (["--wrap=echo cells"], ["--wrap=echo report"], ["--dependency=afterany:1000", "--wrap=echo x"]):
        subprocess.run(["sbatch", f"--output={tmp_path}/%j.log", *job], env=env, check=True)
    assert drain(env) == ["1001 wrap task=None exit=0", "1000 wrap task=None exit=0",
                          "1002 wrap task=None exit=0"]
    refused = subprocess.run(["sbatch", "--exclusive", "--wrap=x"], env=env, capture_output=True, text=True)
    assert refused.returncode == 1 and "option --exclusive is not one this stand-in knows" in refused.stderr


def test_cells_run_alone_in_any_order_and_collect_reports_what_is_finished(beir_dir, tiny_index, tmp_path, capsys):
    path = bench_file(tmp_path, beir_dir, tiny_index)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    cache = str(tmp_path / "cache.sqlite")
    other = subprocess.run([sys.executable, "-m", "garen_infer", "bench", "--config", path, "--cache", cache,
                            "--cell", "3"],
                           env=env, capture_output=True, text=True, timeout=600)
    assert other.returncode == 0, other.stderr
    assert main(["bench", "--config", path, "--cache", cache, "--cell", "1"]) == 0
    assert sorted(p.name for p in (tmp_path / "runs" / "tiny").iterdir()) == ["bm25", "rerank@8"]

    dead = subprocess.Popen(["true"])
    dead.wait()
    # what a --collect killed mid-write leaves
    killed = tmp_path / f".report.tmp-{dead.pid}@{socket.gethostname()}.x1y2"
    (killed / "report" / "figures").mkdir(parents=True)
    assert main(["bench", "--config", path, "--collect"]) == 0
    assert not killed.exists()
    results = json.loads((tmp_path / "report" / "results.json").read_text())["datasets"]["tiny"]
    assert {(c["label"], c["budget"]) for c in results["cells"]} == {("bm25", None), ("rerank", 8)}
    assert results["skipped"] == [{"label": "rerank", "budget": 4, "reason": "not finished: run it with --cell 2"}]

    assert main(["bench", "--config", path, "--cache", cache, "--cell", "2"]) == 0
    assert main(["bench", "--config", path, "--collect"]) == 0
    collected = json.loads((tmp_path / "report" / "results.json").read_text())["datasets"]["tiny"]
    assert len(collected["cells"]) == 3 and not collected["skipped"]

    # the same bench run in one process: the same runs
    whole = load_bench_config(bench_file(tmp_path / "one", beir_dir, tiny_index))
    run_bench(whole, ResponseCache(tmp_path / "one" / "cache.sqlite"), log=lambda *_: None)
    for cell in ("bm25", "rerank@4", "rerank@8"):
        assert (tmp_path / "runs" / "tiny" / cell / "run.trec").read_bytes() == (
            tmp_path / "one" / "runs" / "tiny" / cell / "run.trec"
        ).read_bytes()

    capsys.readouterr()
    assert main(["bench", "--config", path, "--cell", "4"]) == 2
    err = capsys.readouterr().err
    assert (
        "garen-infer bench: error: --cell 4:" in err
        and "has cells 1 to 3 (see --plan)" in err
        and "Traceback" not in err
    )
