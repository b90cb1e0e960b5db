"""Run a command and record the peak resident memory of its whole process tree (the command, the `vllm serve`
processes it starts, their workers), sampled every SAMPLE_S seconds.

    python scripts/vllm_cpu/peak_rss.py PEAKS_FILE LABEL -- command [args...]

Appends "LABEL <peak bytes>" to PEAKS_FILE and exits with the command's status. A tree's resident sizes are
summed, so pages shared between its processes count more than once: the figure errs high, never low.
"""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

SAMPLE_S = 0.25


def tree_rss(root: psutil.Process) -> int:
    total = 0
    for process in [root, *root.children(recursive=True)]:
        try:
            total += process.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass  # it ended between the listing and the read
    return total


def run(command: list[str]) -> tuple[int, int]:
    """The command's exit status and its tree's peak resident bytes."""
    child = subprocess.Popen(command)
    root, peak = psutil.Process(child.pid), 0
    while child.poll() is None:
        try:
            peak = max(peak, tree_rss(root))
        except psutil.NoSuchProcess:
            break
        time.sleep(SAMPLE_S)
    status = child.wait()
    return (128 - status if status < 0 else status), peak  # killed by signal N: 128 + N, as a shell reports it


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.exit("usage: peak_rss.py PEAKS_FILE LABEL -- command [args...]")
    peaks_file, label, command = argv[0], argv[1], argv[3:]
    status, peak = run(command)
    with open(peaks_file, "a", encoding="utf-8") as out:
        out.write(f"{label} {peak}\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
