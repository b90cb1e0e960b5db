"""The one error type users see: a sentence naming what is wrong and where.

The CLI prints ``str(error)`` without a traceback and exits with status 2; the Python API raises it as is.
"""

import errno
import os
import re


class GarenError(Exception):
    """A user-facing error: bad input, a mismatched index, a missing model."""


class DataError(GarenError):
    """Invalid input data. The message names the file, the line (1-based) and the field."""

    def __init__(self, path, problem: str, line: int | None = None, field: str | None = None):
        where = str(path)
        if line is not None:
            where += f", line {line}"
        if field is not None:
            where += f", field '{field}'"
        super().__init__(f"{where}: {problem}")
        self.path, self.line, self.field, self.problem = str(path), line, field, problem


STORAGE_ERRORS = {  # a full disk or a folder that cannot be written: one line, what to do
    errno.ENOSPC: "free some space", errno.EDQUOT: "free some space (disk quota)", errno.EFBIG: "allow larger files",
    errno.EROFS: "choose a writable folder", errno.EACCES: "fix the permissions", errno.EPERM: "fix the permissions",
}
# numpy's tofile (and libraries built on it) reports a short write with no errno: "N requested and M written"
SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")
SHORT_WRITE_ADVICE = (
    "a write was cut short (a full disk or a file size limit, 'ulimit -f'): free some space or allow "
    "larger files"
)


def storage_refusal(err: OSError) -> GarenError | None:
    """A storage failure (full disk, file size limit, read-only folder, a file where a folder should be, ...) as
    one ``GarenError`` line saying what to do; None for any other OSError, which is a defect to show in full."""
    where = err.filename or "output"
    folder = not_a_folder(err)
    if folder:
        return GarenError(f"{where}: {folder}")
    said = " ".join(map(str, err.args))  # a filename set later hides the message from str(err)
    reason: str | None
    if err.errno is None and SHORT_WRITE.search(said):
        advice, reason = SHORT_WRITE_ADVICE, said
    elif err.errno in STORAGE_ERRORS:
        advice, reason = STORAGE_ERRORS[err.errno], err.strerror
    else:
        return None
    return GarenError(f"{where}: {reason}; outputs are written under a temporary name and renamed "
                      f"when complete, so nothing half-written was kept: {advice} and run the same command again")


def not_a_folder(err: OSError) -> str | None:
    """What to do when a path's parent is a file, not a folder (ENOTDIR, or EEXIST from making that folder)."""
    if err.errno == errno.ENOTDIR or (err.errno == errno.EEXIST and err.filename and not os.path.isdir(err.filename)):
        return "part of this path is a file, not a folder; choose a path whose folders are folders"
    return None
