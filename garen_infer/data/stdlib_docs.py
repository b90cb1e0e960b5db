"""The embedded demo corpus: docstrings of this Python's standard library.

Every fresh machine has it, so the demo runs offline without downloading anything. One document per module,
class and public function (docstrings shorter than a sentence are skipped); ids look like ``json.dumps``.
"""

from __future__ import annotations

import importlib
import inspect
import warnings

from garen_infer.data.dataset import Dataset, Document, Query

MODULES = (
    "argparse", "asyncio", "base64", "bisect", "calendar", "collections", "concurrent.futures", "contextlib",
    "copy", "csv", "dataclasses", "datetime", "decimal", "difflib", "enum", "fractions", "functools", "glob",
    "gzip", "hashlib", "heapq", "hmac", "html", "http.client", "http.server", "itertools", "json", "logging",
    "math", "mimetypes", "multiprocessing", "operator", "os", "os.path", "pathlib", "pickle", "pprint",
    "queue", "random", "re", "sched", "secrets", "shelve", "shutil", "socket", "sqlite3", "statistics",
    "string", "struct", "subprocess", "tarfile", "tempfile", "textwrap", "threading", "time", "timeit",
    "traceback", "typing", "unittest", "urllib.parse", "urllib.request", "uuid", "weakref", "xml.etree.ElementTree",
    "zipfile", "zlib",
)

QUESTIONS = (
    ("q1", "How do I compute a SHA-256 checksum of a file's contents?"),
    ("q2", "Run several blocking functions in parallel threads and collect their results."),
    ("q3", "Show the differences between two lists of text lines like the diff tool does."),
    ("q4", "Parse command-line options with a help message for my script."),
    ("q5", "Store Python objects persistently on disk in a dictionary-like way."),
)

MIN_CHARS = 60


def _documents_of(module_name: str) -> list[Document]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = importlib.import_module(module_name)
    docs = []
    text = inspect.getdoc(module) or ""
    if len(text) >= MIN_CHARS:
        docs.append(Document(module_name, text, f"module {module_name}"))
    for name, member in sorted(vars(module).items()):
        if name.startswith("_") or getattr(member, "__module__", None) != module.__name__:
            continue
        if not (inspect.isclass(member) or inspect.isfunction(member) or inspect.isbuiltin(member)):
            continue
        text = inspect.getdoc(member) or ""
        if len(text) >= MIN_CHARS:
            docs.append(Document(f"{module_name}.{name}", text, f"{module_name}.{name}"))
    return docs


def load_stdlib_docs() -> Dataset:
    documents, seen = [], set()
    for module_name in MODULES:
        try:
            module_docs = _documents_of(module_name)
        except ImportError:  # a trimmed Python may lack a module; the corpus is still useful
            continue
        for doc in module_docs:
            if doc.id not in seen:
                seen.add(doc.id)
                documents.append(doc)
    queries = [Query(qid, text) for qid, text in QUESTIONS]
    return Dataset("stdlib-docs", documents, queries, {})
