"""The one error type users see: a sentence naming what is wrong and where.

The CLI prints ``str(error)`` without a traceback and exits with status 2.
"""


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
