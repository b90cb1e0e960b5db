"""Run a command and record the peak memory of its whole process tree (the command, the `vllm serve`
processes it starts, their workers), sampled every SAMPLE_S seconds.

    python scripts/vllm_cpu/peak_rss.py PEAKS_FILE LABEL -- command [args...]

Appends "LABEL <peak bytes>" to PEAKS_FILE, prints the tree at its peak (each process's share and command) to
stderr, and exits with the command's status. Each process counts its proportional set size (PSS: its resident
pages, each shared page divided among the processes that map it), so the sum is the tree's share of the
machine's memory. Resident sizes (RSS) would count shared pages once per process: a 4.6 GB engine process that
forks a child then reads as 9.2 GB until the child execs.
"""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

SAMPLE_S = 0.25


def tree_memory(root: psutil.Process) -> list[tuple[int, int, str]]:
    """(proportional set size in bytes, pid, command) of the root and each of its descendants."""
    sizes = []
    for process in [root, *root.children(recursive=True)]:
        try:
            command = " ".join(process.cmdline()).replace("\n", " ")[:100]
            sizes.append((process.memory_full_info().pss, process.pid, command))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass  # it ended between the listing and the read
    return sizes


def run(command: list[str]) -> tuple[int, int, list[tuple[int, int, str]]]:
    """The command's exit status, its tree's peak resident bytes and the tree at that peak."""
    child = subprocess.Popen(command)
    root, peak, at_peak = psutil.Process(child.pid), 0, []
    while child.poll() is None:
        try:
            sizes = tree_memory(root)
        except psutil.NoSuchProcess:
            break
        if sum(size for size, _, _ in sizes) > peak:
            peak, at_peak = sum(size for size, _, _ in sizes), sizes
        time.sleep(SAMPLE_S)
    status = child.wait()
    return (128 - status if status < 0 else status), peak, at_peak  # killed by signal N: 128 + N, as a shell does


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.exit("usage: peak_rss.py PEAKS_FILE LABEL -- command [args...]")
    peaks_file, label, command = argv[0], argv[1], argv[3:]
    status, peak, at_peak = run(command)
    with open(peaks_file, "a", encoding="utf-8") as out:
        out.write(f"{label} {peak}\n")
    print(f"[peak_rss] {label}: {peak / 2**30:.2f} GiB at the peak, by process:", file=sys.stderr)
    for size, pid, cmd in sorted(at_peak, reverse=True):
        print(f"[peak_rss]   {size / 2**30:6.2f} GiB  pid {pid}  {cmd}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
