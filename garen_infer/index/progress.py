"""Progress for an index stage that runs as one long call with nothing to count (DiskANN's build, a clustering
pass): a bar that shows the time elapsed, refreshed every second, so a build that runs for minutes does not look
hung; and a rate line for a stage that counts its work (documents embedded): done, rate and ETA after each batch.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager

from tqdm.auto import tqdm


@contextmanager
def elapsed_bar(description: str):
    """Show ``description: <elapsed>`` while the block runs; yields the bar (``set_postfix_str`` names the step)."""
    bar = tqdm(desc=description, bar_format="{desc}: {elapsed}{postfix}")
    done = threading.Event()

    def tick():
        while not done.wait(1.0):
            bar.refresh()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield bar
    finally:
        done.set()
        ticker.join()
        bar.close()


# Off a terminal (a log file, a batch job's output) a line is written at most this often, and at the end;
# on a terminal the one line is rewritten after every batch.
LINE_INTERVAL_S = 10.0


class RateLine:
    """``embeddings: 1,024/5,183 documents (19.8%), 31.2 documents/s, ETA 2m13s`` on stderr, after each batch.

    Work done before this run (chunks an interrupted build saved) counts toward the total but not the rate, so
    the ETA is that of the work left."""

    def __init__(self, description: str, total: int, unit: str = "documents", done: int = 0, stream=None):
        self.description, self.total, self.unit = description, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = self.resumed = done
        self.start: float | None = None
        self.last_line = float("-inf")

    def begin(self) -> None:
        """Start the clock of the rate (once a model is loaded: its load is not part of the rate)."""
        if self.start is None:
            self.start = time.perf_counter()

    def note(self, text: str) -> None:
        """One line of its own (a model loading), between two progress lines."""
        self._write(f"{self.description}: {text}")
        if self.terminal:
            self.stream.write("\n")

    def skip(self, count: int) -> None:
        """``count`` more done by an earlier run: part of the total done, not of this run's rate."""
        self.done += count
        self.resumed += count

    def update(self, count: int) -> None:
        self.done += count
        now = time.perf_counter()
        self.begin()
        if self.terminal or self.done >= self.total or now - self.last_line >= LINE_INTERVAL_S:
            self.last_line = now
            self._write(self.text(now - (self.start or now)))

    def text(self, seconds: float) -> str:
        fresh = self.done - self.resumed
        share = f" ({100 * self.done / self.total:.1f}%)" if self.total else ""
        line = f"{self.description}: {self.done:,}/{self.total:,} {self.unit}{share}"
        if fresh and seconds > 0:
            rate = fresh / seconds
            left = (self.total - self.done) / rate
            line += f", {rate:.1f} {self.unit}/s, " + ("done in " + duration(seconds) if self.done >= self.total
                                                        else "ETA " + duration(left))
        return line

    def close(self) -> None:
        if self.terminal:
            self.stream.write("\n")
            self.stream.flush()

    def _write(self, line: str) -> None:
        self.stream.write(f"\r{line}\033[K" if self.terminal else line + "\n")
        self.stream.flush()


def duration(seconds: float) -> str:
    """``45s``, ``2m13s``, ``1h04m``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
