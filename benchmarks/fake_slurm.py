#!/usr/bin/env python3
"""A stand-in for Slurm's `sbatch` and `srun` on a machine without Slurm, strict enough to check a job script.

Installed as `sbatch` and `srun` on the PATH (`python benchmarks/fake_slurm.py install BIN`), it queues what
is submitted and runs it only when asked (`python benchmarks/fake_slurm.py drain`), the way a cluster runs
jobs later, elsewhere and in its own order:

- every task runs from an empty folder under the state folder (not where it was submitted), with a bare
  environment (PATH=/usr/bin:/bin, HOME, the SLURM_* variables; FAKE_SLURM_KEEP names variables to pass on),
  so a script that leans on the submitting shell fails here as it would on a node;
- `#SBATCH` lines are read from the script and command-line options override them; an option this stand-in
  does not know is refused, so nothing is silently ignored;
- `--output` patterns are expanded (%A %a %j %x %%) and the folder must exist, as Slurm requires;
- `drain` runs the ready job submitted LAST first and an array's tasks from the highest index down: a job that
  should wait for another but has no `--dependency` runs too early here and the check shows it;
- `--dependency=afterany:ID[:ID...]` holds a job until those jobs have ended; `afterok` also needs success;
- `drain --together` runs an array's tasks at once, as Slurm packs them on one node (`SLURMD_NODENAME` the same,
  `SLURM_LOCALID` 0 in each, since each task is a job of its own): tasks that take a fixed port collide here.

The state folder is $FAKE_SLURM_DIR (default ./fake-slurm); `order.log` there lists each task as it ran.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

STATE = Path(os.environ.get("FAKE_SLURM_DIR", "fake-slurm")).resolve()
FIRST_JOB_ID = 1000
DEFAULT_OUTPUT = {True: "slurm-%A_%a.out", False: "slurm-%j.out"}  # Slurm's, in the submitting folder
KNOWN = {"array", "dependency", "output", "job-name", "wrap", "parsable", "partition", "time", "mem", "gres",
         "cpus-per-task", "ntasks", "nodes"}
WITHOUT_VALUE = {"parsable"}


def fail(message: str) -> None:
    print(f"{Path(sys.argv[0]).name}: error: {message}", file=sys.stderr)
    raise SystemExit(1)


def parse_options(words: list[str], origin: str) -> tuple[dict, list[str]]:
    """`--name=value`, `--name value` and `--flag` options up to the first word that is not one; the rest."""
    options, rest = {}, list(words)
    while rest and rest[0].startswith("--"):
        name, has_value, value = rest.pop(0)[2:].partition("=")
        if name not in KNOWN:
            fail(f"{origin}: option --{name} is not one this stand-in knows ({', '.join(sorted(KNOWN))})")
        if name in WITHOUT_VALUE:
            options[name] = True
            continue
        if not has_value:
            if not rest:
                fail(f"{origin}: option --{name} needs a value")
            value = rest.pop(0)
        options[name] = value
    return options, rest


def script_directives(script: str, origin: str) -> dict:
    """The `#SBATCH` options at the top of a batch script (Slurm stops reading them at the first command)."""
    words = []
    for line in script.splitlines()[1:]:
        if line.startswith("#SBATCH"):
            words += shlex.split(line[len("#SBATCH"):])
        elif line.strip() and not line.startswith("#"):
            break
    return parse_options(words, origin)[0]


def array_tasks(spec: str | None) -> list[int | None]:
    if spec is None:
        return [None]
    tasks = []
    for part in spec.split(","):
        first, _, last = part.partition("-")
        tasks += range(int(first), int(last or first) + 1)
    return tasks


def dependencies(spec: str | None) -> tuple[str, list[int]]:
    if spec is None:
        return "none", []
    kind, _, ids = spec.partition(":")
    if kind not in ("afterany", "afterok") or not ids:
        fail(f"--dependency={spec}: this stand-in knows afterany:ID[:ID...] and afterok:ID[:ID...]")
    return kind, [int(i) for i in ids.split(":")]


def sbatch(argv: list[str]) -> int:
    options, rest = parse_options(argv, "sbatch")
    if "wrap" in options:
        if rest:
            fail("sbatch: --wrap and a script file: give one")
        script = f"#!/bin/sh\n{options['wrap']}\n"
    else:
        if len(rest) != 1:
            fail("sbatch: name one batch script (arguments to it are not supported here)")
        script = Path(rest[0]).read_text()
        if not script.startswith("#!"):
            fail(f"sbatch: {rest[0]}: a batch script starts with #! (Slurm refuses it otherwise)")
        options = {**script_directives(script, rest[0]), **options}
    kind, after = dependencies(options.get("dependency"))
    (STATE / "jobs").mkdir(parents=True, exist_ok=True)
    job_id = FIRST_JOB_ID + len(list((STATE / "jobs").glob("*.json")))
    for other in after:
        if not (STATE / "jobs" / f"{other}.json").is_file():
            fail(f"sbatch: --dependency: no job {other} was submitted")
    job = {"id": job_id, "name": options.get("job-name", "wrap" if "wrap" in options else Path(rest[0]).name),
           "script": script, "tasks": array_tasks(options.get("array")),
           "output": options.get("output", str(Path.cwd() / DEFAULT_OUTPUT["array" in options])),
           "after": after, "after_kind": kind, "submitted_from": str(Path.cwd()), "states": {}}
    (STATE / "jobs" / f"{job_id}.json").write_text(json.dumps(job))
    print(job_id if options.get("parsable") else f"Submitted batch job {job_id}")
    return 0


def output_path(pattern: str, job: dict, task: int | None) -> Path:
    values = {"A": str(job["id"]), "a": "4294967294" if task is None else str(task), "j": str(job["id"]),
              "x": job["name"], "%": "%"}
    path = Path(re.sub(r"%([Aajx%])", lambda m: values[m.group(1)], pattern))
    return path if path.is_absolute() else Path(job["submitted_from"]) / path


def run_task(job: dict, task: int | None) -> int:
    started = start_task(job, task)
    return finish_task(job, task, *started) if started else 1


def start_task(job: dict, task: int | None) -> tuple[subprocess.Popen, Path] | None:
    log = output_path(job["output"], job, task)
    if not log.parent.is_dir():  # Slurm does not make it: the job fails at once
        print(f"[fake-slurm] job {job['id']} task {task}: no output folder {log.parent}", file=sys.stderr)
        return None
    node = STATE / "node" / f"{job['id']}-{task}"
    node.mkdir(parents=True, exist_ok=True)
    script = STATE / "jobs" / f"{job['id']}.sh"
    script.write_text(job["script"])
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", str(node)), "SLURM_JOB_ID": str(job["id"]),
           "SLURM_JOB_NAME": job["name"], "SLURM_SUBMIT_DIR": job["submitted_from"], "SLURMD_NODENAME": "node1",
           "SLURM_LOCALID": "0",
           **{name: os.environ[name] for name in os.environ.get("FAKE_SLURM_KEEP", "").split(",")
              if name in os.environ}}
    if task is not None:
        env |= {"SLURM_ARRAY_JOB_ID": str(job["id"]), "SLURM_ARRAY_TASK_ID": str(task)}
    with log.open("w") as out:
        script.chmod(0o755)  # run by its #! line, as Slurm does: /bin/sh for --wrap
        return subprocess.Popen([str(script)], cwd=node, env=env, stdout=out, stderr=subprocess.STDOUT), log


def finish_task(job: dict, task: int | None, process: subprocess.Popen, log: Path) -> int:
    code = process.wait()
    with (STATE / "order.log").open("a") as order:
        order.write(f"{job['id']} {job['name']} task={task} exit={code} log={log}\n")
    return code


def run_together(job: dict, tasks: list) -> list[int]:
    """An array's tasks started at once on one node, then waited for."""
    started = [(task, start_task(job, task)) for task in tasks]
    return [finish_task(job, task, *begun) if begun else 1 for task, begun in started]


def drain(together: bool = False) -> int:
    """Run every queued job whose dependencies allow it, the last submitted first, until none is left
    (``together``: an array's tasks at once, on one node)."""
    jobs = {int(p.stem): json.loads(p.read_text()) for p in (STATE / "jobs").glob("*.json")}
    ended: dict[int, bool] = {i: j["ended_ok"] for i, j in jobs.items() if "ended_ok" in j}
    while True:
        ready = [j for i, j in jobs.items() if i not in ended and all(a in ended for a in j["after"])
                 and (j["after_kind"] != "afterok" or all(ended[a] for a in j["after"]))]
        if not ready:
            break
        job = max(ready, key=lambda j: j["id"])
        highest_first = sorted(job["tasks"], key=lambda t: -1 if t is None else t, reverse=True)
        codes = run_together(job, highest_first) if together else [run_task(job, task) for task in highest_first]
        ended[job["id"]] = job["ended_ok"] = not any(codes)
        (STATE / "jobs" / f"{job['id']}.json").write_text(json.dumps(job))
    never = sorted(i for i in jobs if i not in ended)
    for i in never:  # afterok on a failed job: Slurm leaves it pending with DependencyNeverSatisfied
        print(f"[fake-slurm] job {i} never ran: a job it depends on failed", file=sys.stderr)
    return 1 if never or not all(ended.values()) else 0


def srun(argv: list[str]) -> int:
    """Inside a job, run the command as the job's one task; outside a job there is no allocation."""
    if "SLURM_JOB_ID" not in os.environ:
        fail("srun: no job allocation here (this stand-in runs srun only inside a job)")
    _, command = parse_options(argv, "srun")
    if not command:
        fail("srun: no command given")
    os.execvp(command[0], command)


def install(folder: str) -> int:
    """Put `sbatch` and `srun` that run this file into FOLDER (for the PATH)."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    for name in ("sbatch", "srun"):
        shim = target / name
        runner = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).resolve()))}"
        shim.write_text(f'#!/bin/sh\nexec {runner} {name} "$@"\n')
        shim.chmod(0o755)
    return 0


def main(argv: list[str]) -> int:
    name, args = (argv[1], argv[2:]) if len(argv) > 1 else ("", [])
    if Path(argv[0]).name in ("sbatch", "srun"):
        name, args = Path(argv[0]).name, argv[1:]
    commands = {"sbatch": sbatch, "srun": srun, "drain": lambda a: drain(a == ["--together"]),
                "install": lambda a: install(*a)}
    if name not in commands:
        fail("usage: fake_slurm.py sbatch ARGS | srun ARGS | drain [--together] | install BIN_FOLDER")
    return commands[name](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
