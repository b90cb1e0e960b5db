"""A model server of one cluster task, on a node other tasks share: ``python -m garen_infer.running.task_server``.

    python -m garen_infer.running.task_server --model NAME --log LOG [--port free|localid|N] [--timeout 900] \\
        --serve 'vllm serve NAME --port {port} ...' -- garen-infer run ... --set 'models.reranker.base_url={url}'

Several array tasks on one node each start a server; a fixed port lets the later ones fail to bind while their
health check succeeds against the first task's server, which ends with that task. Here each task's server takes
its own port (``free``: one the kernel hands out now; ``localid``: 8000 + ``SLURM_LOCALID``, for tasks of one job
step), writes its output to ``LOG`` (beside the task's own log), and is waited for at most ``--timeout`` seconds:
the wait ends with one line as soon as the server process has exited (the log's last lines shown), and succeeds
only when ``GET {url}/models`` lists ``--model`` and the socket listening on the port belongs to this task's
server (its process or one it started: read from ``/proc``), so an answer from another task's server, which may
serve the same model while this one still loads, is never taken for this one's. Then the command runs with
``{port}`` and ``{url}`` in its words replaced (and ``GAREN_SERVER_URL`` set), and the server is stopped when it
ends; the exit status is the command's.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from garen_infer.errors import GarenError

POLL_SECONDS = 2.0  # the longest pause between two looks; the first ones come sooner


def task_port(choice: str) -> int:
    """``free``: a port nothing listens on now; ``localid``: 8000 + SLURM_LOCALID; or a number."""
    if choice == "free":
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return probe.getsockname()[1]
    if choice == "localid":
        return 8000 + int(os.environ.get("SLURM_LOCALID", "0"))
    if choice.isdigit():
        return int(choice)
    raise GarenError(f"--port '{choice}': expected free, localid or a port number")


def served_models(url: str, timeout: float = 5.0) -> list[str] | None:
    """The model ids ``GET {url}/models`` lists, or None while nothing answers there."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # a node's own server, never a proxy
    try:
        with opener.open(url + "/models", timeout=timeout) as answer:
            listed = json.loads(answer.read())
    except (OSError, ValueError):
        return None
    if not isinstance(listed, dict):
        return []
    return [m["id"] for m in listed.get("data", []) if isinstance(m, dict) and isinstance(m.get("id"), str)]


def listening_sockets(port: int) -> set[str]:
    """The inodes of the TCP sockets listening on ``port`` (Linux's /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                found.add(fields[9])
    return found


def owned_by(session: int, inodes: set[str]) -> bool | None:
    """Whether a process of ``session`` (the server and what it started) holds one of the sockets; None where
    /proc cannot tell (another system)."""
    if not Path("/proc/self/fd").is_dir():
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getsid(int(proc.name)) != session:
                continue
            if any(
                os.readlink(fd).removeprefix("socket:[").removesuffix("]") in inodes
                for fd in (proc / "fd").iterdir()
            ):
                return True
        except OSError:  # ended meanwhile, or not ours to read
            continue
    return False


def wait_until_serving(server: subprocess.Popen, url: str, model: str, timeout: float, log: Path) -> None:
    """Return once this task's server lists ``model``; one GarenError line when it exits, serves another model,
    or is not up within ``timeout`` seconds."""
    deadline, pause = time.monotonic() + timeout, 0.05
    while True:
        if server.poll() is not None:
            raise GarenError(f"the model server exited with status {server.returncode} before serving '{model}' at "
                             f"{url}; its log {log} ends: {last_lines(log)}")
        listed = served_models(url)
        if listed is not None:
            if owned_by(server.pid, listening_sockets(int(url.rsplit(":", 1)[1].split("/")[0]))) is False:
                raise GarenError(f"the server answering at {url} is not this task's (another process holds the port, "
                                 f"serving {', '.join(map(str, listed)) or 'no model'}); use --port free")
            if model in listed:
                return
            raise GarenError(f"the server answering at {url} serves {', '.join(map(str, listed)) or 'no model'}, "
                             f"not '{model}'; give --model the name the server lists")
        if time.monotonic() > deadline:
            raise GarenError(f"the model server did not serve '{model}' at {url} within {timeout:.0f} s (--timeout); "
                             f"its log {log} ends: {last_lines(log)}")
        time.sleep(pause)
        pause = min(pause * 2, POLL_SECONDS)


def last_lines(log: Path, count: int = 3) -> str:
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(lines[-count:]) or "(empty)"


def stop(server: subprocess.Popen, grace: float = 30.0) -> None:
    """End the server and what it started (its process group), politely first."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def run_with_server(serve: str, model: str, command: list[str], log: Path, port_choice: str = "free",
                    timeout: float = 900.0) -> int:
    port = task_port(port_choice)
    url = f"http://127.0.0.1:{port}/v1"
    fill = lambda word: word.replace("{port}", str(port)).replace("{url}", url)  # noqa: E731
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        server = subprocess.Popen(shlex.split(fill(serve)), stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        wait_until_serving(server, url, model, timeout, log)
        print(f"[task-server] '{model}' serving at {url} (pid {server.pid}, log {log})", file=sys.stderr, flush=True)
        return subprocess.run([fill(word) for word in command], env={**os.environ, "GAREN_SERVER_URL": url}).returncode
    finally:
        stop(server)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m garen_infer.running.task_server", description=__doc__.split("\n\n")[0])
    ap.add_argument("--serve", required=True, help="the server's command line; {port} is this task's port")
    ap.add_argument("--model", required=True, help="the model name the server must list at /v1/models")
    ap.add_argument("--log", required=True, help="the server's log (beside the task's own)")
    ap.add_argument("--port", default="free", help="free (default), localid (8000 + SLURM_LOCALID) or a number")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the server (default 900)")
    ap.add_argument("command", nargs=argparse.REMAINDER,
                    help="-- then the task's command; {port} and {url} are filled in")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the task's command after --")
    try:
        return run_with_server(args.serve, args.model, command, Path(args.log), args.port, args.timeout)
    except GarenError as err:
        print(f"task_server: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
