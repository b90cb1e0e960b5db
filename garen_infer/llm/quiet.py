"""Third-party chatter kept off the user's screen: the warnings and progress bars that transformers,
sentence-transformers and huggingface_hub print as they load or run a model (a model card note, "Batches: 100%",
a tracer warning). garen_infer shows its own progress, one line per batch; the libraries' errors still show."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
from contextlib import contextmanager

LIBRARY_LOGGERS = ("transformers", "sentence_transformers", "huggingface_hub", "optimum", "nncf", "openvino",
                   "torch.onnx")


def quiet_libraries() -> None:
    """Errors only from the model libraries, and none of their own progress bars. Idempotent, cheap."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # read when transformers is first imported
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # its fork warning when a worker process starts
    try:  # imported first: transformers and huggingface_hub set their loggers' levels as they are imported
        from transformers.utils import logging as transformers_logging
    except ImportError:  # not installed: nothing of it to quiet
        pass
    else:
        transformers_logging.set_verbosity_error()
        transformers_logging.disable_progress_bar()  # "Loading weights" bars of from_pretrained
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


@contextmanager
def captured_output(what: str):
    """Whatever a library prints through Python's sys.stdout and sys.stderr while the block runs (nncf's table
    and progress bar, say) goes to the debug log under ``what``, not to the screen."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        yield
    if buffer.getvalue().strip():
        logging.getLogger("garen_infer.libraries").debug("%s printed:\n%s", what, buffer.getvalue())


@contextmanager
def native_stdout_to_log(what: str):
    """What native code (DiskANN's Rust: "Batch insert completed", ...) writes to file descriptor 1 while the block
    runs goes to the debug log under ``what``: not to the screen, nor into the JSON that ``--json`` writes there.
    If the block fails, the last lines it printed follow the error on stderr."""
    sys.stdout.flush()
    saved = os.dup(1)
    failed = False
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            sink.seek(0)
            printed = sink.read().decode("utf-8", "replace")
            if printed.strip():
                logging.getLogger("garen_infer.libraries").debug("%s printed:\n%s", what, printed)
                if failed:
                    sys.stderr.write("".join(printed.splitlines(keepends=True)[-10:]))
