"""The one error type users see: a sentence naming what is wrong and where.

The CLI prints ``str(error)`` without a traceback and exits with status 2; the Python API raises it as is.
"""

import errno


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


def storage_refusal(err: OSError) -> GarenError | None:
    """A storage failure (full disk, read-only folder, ...) as one ``GarenError`` line saying what to do; None for
    any other OSError, which is a defect to show in full."""
    if err.errno not in STORAGE_ERRORS:
        return None
    return GarenError(f"{err.filename or 'output'}: {err.strerror}; outputs are written under a temporary name and renamed "
                      f"when complete, so nothing half-written was kept: {STORAGE_ERRORS[err.errno]} and run the same "
                      f"command again")
