"""A cluster task's own model server (garen_infer/running/task_server.py): two array tasks on one node each get
their own port and a server log beside the task's, and the health wait fails with one line, not a hang, when the
server exits, does not come up in time, or the port is another task's. The server is the stand-in engine."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from garen_infer.errors import GarenError
from garen_infer.running.task_server import run_with_server, task_port

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "benchmarks" / "standin_engine.py"
FAKE_SLURM = REPO / "benchmarks" / "fake_slurm.py"
SHOW_MODELS = "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1] + '/models').read().decode())"


def standin(port: str = "{port}", model: str = "m") -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(STANDIN))} --port {port} --model {model}"


def test_two_tasks_on_one_node_each_serve_on_their_own_port(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    task = (f"{shlex.quote(sys.executable)} -m garen_infer.running.task_server --model m --timeout 60 "
            f"--log {logs}/task-$SLURM_ARRAY_JOB_ID-$SLURM_ARRAY_TASK_ID.server.log --serve {shlex.quote(standin())} "
            f"-- {shlex.quote(sys.executable)} -c {shlex.quote(SHOW_MODELS)} {{url}}")
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\n#SBATCH --array=1-2\n#SBATCH --output={logs}/task-%A-%a.log\nset -e\n{task}\n")
    env = {**os.environ, "FAKE_SLURM_DIR": str(tmp_path / "slurm"), "FAKE_SLURM_KEEP": "PYTHONPATH,HF_HUB_OFFLINE",
           "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, str(FAKE_SLURM), "sbatch", str(script)], env=env, check=True, capture_output=True)
    drained = subprocess.run([sys.executable, str(FAKE_SLURM), "drain", "--together"], env=env,
                             capture_output=True, text=True)
    task_logs = [(logs / f"task-1000-{k}.log").read_text() for k in (1, 2)]
    assert drained.returncode == 0, task_logs
    ports = {log.split("serving at http://127.0.0.1:")[1].split("/")[0] for log in task_logs}
    assert len(ports) == 2  # each task its own server
    assert all('"id": "m"' in log for log in task_logs)
    assert all("serving m at" in (logs / f"task-1000-{k}.server.log").read_text() for k in (1, 2))


def test_a_server_that_exits_is_reported_at_once_with_its_log(tmp_path):
    crash = f"{shlex.quote(sys.executable)} -c \"print('CUDA out of memory'); raise SystemExit(3)\""
    with pytest.raises(GarenError, match=r"exited with status 3 .*CUDA out of memory"):
        run_with_server(crash, "m", ["true"], tmp_path / "server.log", timeout=60)


def test_a_server_that_never_comes_up_ends_the_wait_at_the_timeout(tmp_path):
    with pytest.raises(GarenError, match=r"did not serve 'm' .* within 1 s \(--timeout\)"):
        run_with_server("sleep 30", "m", ["true"], tmp_path / "server.log", timeout=1)


def test_another_tasks_server_on_the_port_is_not_taken_for_this_ones(tmp_path):
    port = task_port("free")
    other = subprocess.Popen(shlex.split(standin(str(port))), stdout=subprocess.PIPE, text=True)
    try:
        assert "serving" in other.stdout.readline()  # the other task's server, the same model, on the port
        with pytest.raises(GarenError, match=r"is not this task's .*serving m\); use --port free"):
            run_with_server("sleep 30", "m", ["true"], tmp_path / "server.log", port_choice=str(port), timeout=30)
    finally:
        other.kill()
        other.wait()


def test_a_server_that_serves_another_model_is_one_line_naming_both(tmp_path):
    with pytest.raises(GarenError, match=r"serves other, not 'm'; give --model the name the server lists"):
        run_with_server(standin(model="other"), "m", ["true"], tmp_path / "server.log", timeout=60)
