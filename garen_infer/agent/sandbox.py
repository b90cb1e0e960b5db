"""The bash tool's sandbox: runs one checked pipeline of read-only search commands, without a shell.

A query's sandbox is a working folder holding ``corpus`` (a symbolic link to the index's corpus files) and
``scopes/`` (the scope files ``embed_recall`` writes). Every command:

1. is split into a pipeline by ``shell_parse`` and each stage is checked against ``command_rules``: anything else
   is refused and nothing runs;
2. has every path argument resolved (symbolic links included) and refused unless it lies inside the corpus or the
   working folder;
3. runs stage after stage with ``subprocess`` (no shell, an empty environment, absolute program paths), each
   process in its own process group under resource limits set before ``exec``: CPU seconds, address space, no
   file writes at all (RLIMIT_FSIZE 0) and no core files; the whole pipeline shares one wall-clock deadline, after
   which the process group is killed. RLIMIT_FSIZE stops writing, not creating: so that no file is created either,
   the temporary folder (``TMPDIR``, where ``sort`` spills) is a path under ``/dev/null``, which cannot exist;
4. keeps at most ``stage_output_bytes`` of each stage's output (the next stage reads that much) and stops the last
   stage early once the caller has the matches it asked for (``unit_limit``), as the paper's sequential ``rg -j1``
   does (RARG sec. 7 Limitations: stop once 60, or M = 500, matches are collected).

``xargs`` is run here, not by the system's xargs: its items are split from the previous stage's output, appended
to its (already checked) command, and every item is checked as a path before anything runs.
ripgrep always gets ``-j1`` (sequential: matches come in the order of its file arguments, i.e. scope order; RARG
sec. 3.2) and ``--no-config``; a directory search also gets ``--sort=path`` so its order is reproducible.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from garen_infer.agent.binaries import ripgrep, text_tool
from garen_infer.agent.command_rules import SEARCHERS, ParsedCommand, parse_command
from garen_infer.agent.excerpts import count_units
from garen_infer.agent.shell_parse import Refused, split_pipeline

CORPUS_LINK = "corpus"
SCOPES = "scopes"
# Sets the limits in the child, then becomes the program: no Python code runs between fork and exec in our
# (multi-threaded) process, which Popen's preexec_fn would do.
_LAUNCHER = (
    "import os,resource as r,sys\n"
    "c,m=int(sys.argv[1]),int(sys.argv[2])\n"
    "for k,v in ((r.RLIMIT_CPU,c),(r.RLIMIT_AS,m),(r.RLIMIT_FSIZE,0),(r.RLIMIT_CORE,0)):\n"
    " try:r.setrlimit(k,(v,v))\n"
    " except (ValueError,OSError):\n"
    "  if k==r.RLIMIT_FSIZE:raise\n"
    "os.execv(sys.argv[3],sys.argv[3:])\n"
)
# A folder under a character device cannot exist, nor be created, whoever runs the sandbox: a program that wants a
# temporary file (sort, when its input outgrows its buffer) fails with "cannot create temporary file" instead.
NO_TEMPORARY_FOLDER = "/dev/null/no-temporary-files"
_ENV = {"LC_ALL": "C.UTF-8", "PATH": "/nonexistent", "TMPDIR": NO_TEMPORARY_FOLDER}


@dataclass(frozen=True)
class Limits:
    seconds: float = 20.0  # wall clock for the whole pipeline (and CPU seconds per process)
    memory_bytes: int = 4 << 30  # address space per process
    stage_output_bytes: int = 8 << 20  # what one stage may hand to the next (or to the caller)
    stderr_bytes: int = 2000
    xargs_chunk_bytes: int = 100_000  # item bytes per invocation, as xargs's own default of ~128 KiB


@dataclass
class RunResult:
    output: str = ""
    stderr: str = ""
    status: int = 0
    refused: str | None = None
    timed_out: bool = False
    cut: bool = False  # some stage's output was cut at a limit
    stages: list[ParsedCommand] = field(default_factory=list)

    @property
    def searches(self) -> bool:
        """True when a stage is rg or grep: the output is a list of matches (or derived from one)."""
        return any(
            s.program in SEARCHERS or (s.program == "xargs" and s.positionals[0] in SEARCHERS)
            for s in self.stages
        )


class Sandbox:
    def __init__(self, corpus_dir: Path, workdir: Path, limits: Limits = Limits()):
        self.workdir = Path(workdir)
        (self.workdir / SCOPES).mkdir(parents=True, exist_ok=True)
        link = self.workdir / CORPUS_LINK
        if not link.is_symlink():
            link.symlink_to(Path(corpus_dir).resolve(), target_is_directory=True)
        self.roots = (Path(corpus_dir).resolve(), self.workdir.resolve())
        self.limits = limits

    # ---- paths ----------------------------------------------------------------------------------------------
    def resolve(self, path: str) -> Path:
        """The real location of ``path`` (relative to the working folder); Refused when outside the roots."""
        if not path or "\x00" in path:
            raise Refused("an empty path is not allowed")
        real = Path(os.path.realpath(self.workdir / path))
        if not any(real == root or root in real.parents for root in self.roots):
            raise Refused(f"'{path}' is outside the corpus and the scope files; only those can be read")
        return real

    # ---- running --------------------------------------------------------------------------------------------
    def run(self, command: str, unit_limit: int | None = None) -> RunResult:
        """Run ``command``. When it searches (rg or grep in the pipeline) and ``unit_limit`` is given, the last
        stage is stopped once it has printed more than ``unit_limit`` matches (``cut`` then says so)."""
        result = RunResult()
        try:
            stages = [parse_command(words) for words in split_pipeline(command)]
            result.stages = stages
            argvs = [self._argv(stage, first=(k == 0)) for k, stage in enumerate(stages)]
        except Refused as why:
            result.refused = str(why)
            return result
        deadline = time.monotonic() + self.limits.seconds
        enough = (lambda data: count_units(data) > unit_limit) if unit_limit is not None and result.searches else None
        data = b""
        for k, (stage, argv) in enumerate(zip(stages, argvs)):
            last = k == len(stages) - 1
            stop = enough if last else None
            try:
                if stage.program == "xargs":
                    data, status, err, timed_out, cut = self._xargs(stage, data, deadline, stop)
                else:
                    data, status, err, timed_out, cut = self._spawn(argv, data, deadline, stop)
            except Refused as why:
                result.refused = str(why)
                return result
            result.cut |= cut
            result.stderr += err
            if timed_out:
                result.timed_out = True
                break
        result.output = data.decode("utf-8", errors="replace")
        result.status = status
        return result

    def _argv(self, stage: ParsedCommand, first: bool, paths: list[str] | None = None) -> list[str]:
        """The checked stage as an argument list: program path, normalised flags, ``--``, checked paths."""
        if stage.program == "xargs":
            return []
        paths = list(stage.positionals if paths is None else paths)
        flags = list(stage.flags)
        recursive = any(n in ("-r", "--recursive") for n, _ in flags)
        if stage.program == "rg" or (stage.program == "grep" and recursive):
            if first and not paths:
                paths = [CORPUS_LINK]  # a search with no path searches the corpus (the link is not followed from '.')
        resolved = [self.resolve(p) for p in paths if p != "-"]
        words: list[str] = []
        if stage.program == "rg":
            flags = [(n, v) for n, v in flags if n not in ("-j", "--threads")]
            words += ["--no-config", "-j1"]
            if any(r.is_dir() for r in resolved) and not any(n in ("--sort", "--sortr") for n, _ in flags):
                words.append("--sort=path")
        for name, value in flags:
            if name in ("-e", "--regexp", "--expression"):
                continue  # patterns are written once, below
            words += [name] if value is None else ([f"{name}={value}"] if name.startswith("--") else [name, value])
        for pattern in stage.patterns:
            words += ["-e", pattern]  # never mistaken for a flag, even when it starts with '-'
        program = ripgrep() if stage.program == "rg" else text_tool(stage.program)
        return [program, *words, "--", *paths]

    def _xargs(self, stage: ParsedCommand, data: bytes, deadline: float, stop) -> tuple:
        items = split_items(data, stage.flags)
        inner = parse_command(stage.positionals)
        per_call = next((int(v) for n, v in stage.flags
                         if n in ("-n", "--max-args", "-L", "--max-lines") and v is not None), 0)
        chunks: list[list[str]] = []
        size = 0  # item bytes in the last chunk
        for item in items:
            if not chunks or (
                len(chunks[-1]) == per_call if per_call else size + len(item) > self.limits.xargs_chunk_bytes
            ):
                chunks.append([])
                size = 0
            chunks[-1].append(item)
            size += len(item) + 1
        # checks every item
        argvs = [self._argv(inner, first=False, paths=[*inner.positionals, *chunk]) for chunk in chunks]
        out, status, errors, timed_out, cut = b"", 0, "", False, False
        for argv in argvs:
            piece, code, err, timed_out, piece_cut = self._spawn(
                argv, b"", deadline, (lambda b, before=out: stop(before + b)) if stop else None, len(out)
            )
            out += piece
            errors += err
            status = max(status, code)  # the worst invocation's (1 = no match for rg and grep)
            cut |= piece_cut
            if timed_out or piece_cut or len(out) >= self.limits.stage_output_bytes:
                break
        return out, status, errors, timed_out, cut

    def _spawn(self, argv: list[str], stdin: bytes, deadline: float, stop, already: int = 0) -> tuple:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b"", 124, "", True, False
        launcher = [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(int(remaining) + 1),
                    str(self.limits.memory_bytes), *argv]
        proc = subprocess.Popen(
            launcher, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.workdir,
            env=_ENV, start_new_session=True,
        )
        errors: list[bytes] = []
        threads = [
            threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True),
            threading.Thread(target=_drain, args=(proc.stderr, errors, self.limits.stderr_bytes), daemon=True),
        ]
        for t in threads:
            t.start()
        out, cut, timed_out = bytearray(), False, False
        cap = max(self.limits.stage_output_bytes - already, 0)
        assert proc.stdout is not None  # opened with stdout=PIPE
        fd = proc.stdout.fileno()
        while True:
            wait = deadline - time.monotonic()
            if wait <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([fd], [], [], min(wait, 0.5))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            out += chunk
            if len(out) >= cap or (stop is not None and stop(bytes(out))):
                cut = True
                del out[cap:]
                break
        if timed_out or cut:
            _kill(proc)
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:  # closed its output but kept running
            _kill(proc)
            proc.wait()
            timed_out = True
        proc.stdout.close()
        for t in threads:
            t.join(timeout=5)
        code = proc.returncode if not timed_out else 124
        return bytes(out), code, b"".join(errors).decode("utf-8", errors="replace"), timed_out, cut


def split_items(data: bytes, flags: list[tuple[str, str | None]]) -> list[str]:
    """xargs's items: by -0 (NUL), by -d DELIM (escapes like '\\n' understood), else blanks with quotes."""
    import shlex

    text = data.decode("utf-8", errors="replace")
    names = dict(flags)
    if "-0" in names or "--null" in names:
        delimiter = "\x00"
    elif "-d" in names or "--delimiter" in names:
        delimiter = _delimiter(names.get("-d") or names.get("--delimiter") or "")
    else:
        try:
            return shlex.split(text, posix=True)
        except ValueError:
            raise Refused("xargs: unmatched quote in its input (use -d '\\n')") from None
    items = text.split(delimiter)
    if items and items[-1] == "":
        items.pop()  # the delimiter ending the last item
    return items


def _delimiter(raw: str) -> str:
    escapes = {"\\n": "\n", "\\t": "\t", "\\r": "\r", "\\0": "\x00", "\\\\": "\\"}
    if raw in escapes:
        return escapes[raw]
    if raw.startswith("\\x") and len(raw) == 4:
        return chr(int(raw[2:], 16))
    if len(raw) == 1:
        return raw
    raise Refused(f"xargs -d wants one character (or an escape such as '\\n'), not '{raw}'")


def _feed(pipe, data: bytes) -> None:
    try:
        pipe.write(data)
    except (BrokenPipeError, OSError):
        pass  # the program stopped reading: fine
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _drain(pipe, sink: list[bytes], keep: int) -> None:
    kept = 0
    for chunk in iter(lambda: pipe.read(1 << 14), b""):
        if kept < keep:
            sink.append(chunk[: keep - kept])
            kept += len(sink[-1])
    pipe.close()


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
