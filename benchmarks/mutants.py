"""Mutation check: does the test suite notice a single, real bug? Each mutant below changes one line of the code
in a copy of the checkout (the tracked files, in a temporary folder), runs the tests that should catch it, and
counts it caught when they fail. A survivor is a behaviour change no test pins: write the test that catches it.

    .venv/bin/python benchmarks/mutants.py [--only NAME ...] [--list]     (or: make mutants)

Prints one line per mutant (caught, survived, or gone: its line is no longer in the code, so the mutant needs
updating) and the totals; exits 1 when a mutant survived or is gone. Each mutant runs its tests in a fresh process
(`pytest -x`, a few seconds to two minutes each); widen the list as bugs are found.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEST_TIMEOUT_S = 900


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # the file it changes, relative to the checkout
    before: str  # text that occurs exactly once in that file
    after: str
    tests: tuple[str, ...]  # pytest arguments that should fail on the mutant


MUTANTS = (
    Mutant("engine-call-unbounded", "garen_infer/running/engine_queue.py",
           "size = min(len(self.pending), self.shape.items_per_call)", "size = len(self.pending)",
           ("tests/test_scheduler.py", "-k", "max_batch")),
    Mutant("server-one-lane", "garen_infer/running/engine_queue.py",
           "return Shape(slots, 1) if slots and slots > 1 else", "return Shape(1, max(max_batch, 1)) if slots else",
           ("tests/test_scheduler.py", "-k", "one_request_per_slot")),
    Mutant("summary-budget-ge", "garen_infer/index/grouping/summaries.py",
           "sum(map(len, words)) > budget_words", "sum(map(len, words)) >= budget_words",
           ("tests/test_fidelity.py", "-k", "summarizer")),
    Mutant("export-identity-name-inode", "garen_infer/llm/exported_models.py",
           "tuple((p.name, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino)", "tuple((p.name, s.st_ino)",
           ("tests/test_checkpoint_loading.py", "-k", "in_place")),
    Mutant("shards-sha1", "garen_infer/configuration/shards.py",
           "hashlib.sha256(qid.encode(\"utf-8\"))", "hashlib.sha1(qid.encode(\"utf-8\"))",
           ("tests/test_shards.py", "-k", "sha256_deal or depends_on_query_ids")),
    Mutant("merge-no-fingerprint", "garen_infer/running/merge.py",
           "config[\"corpus_fingerprint\"] != dataset.fingerprint() or ", "",
           ("tests/test_shards.py", "-k", "edited_corpus")),
    Mutant("backoff-uncapped", "garen_infer/llm/backends/replicas.py",
           "rest = min(self.backoff * 2 ** (replica.failures - 1), self.max_backoff)",
           "rest = self.backoff * 2 ** (replica.failures - 1)", ("tests/test_openai_replicas.py", "-k", "backoff")),
    Mutant("interval-90", "garen_infer/report/significance.py",
           "tail = (1 - confidence) / 2", "tail = (1 - 0.90) / 2", ("tests/test_report_paper.py", "-k", "interval")),
    Mutant("ids-with-spaces", "garen_infer/data/validate.py",
           "if any(char.isspace() for char in value):", "if False:", ("tests/test_loaders.py",)),
    Mutant("lone-surrogates", "garen_infer/data/validate.py",
           "    if surrogate:", "    if False:", ("tests/test_loaders.py",)),
    Mutant("yaml-aliases-unbounded", "garen_infer/configuration/safe_yaml.py",
           "if _expanded_size(node, {}) > MAX_VALUES:", "if False:", ("tests/test_settings.py", "-k", "alias")),
    Mutant("merge-unclaimed", "garen_infer/running/merge.py",
           "        mark_merging(out, folders)\n", "", ("tests/test_shards.py", "-k", "killed and renamed")),
    Mutant("cache-merge-raw-uri", "garen_infer/llm/cache_merge.py",
           "sqlite3.connect(f\"{source.resolve().as_uri()}?mode=ro\"", "sqlite3.connect(f\"file:{source}?mode=ro\"",
           ("tests/test_cache_shared.py", "-k", "uri_characters")),
    Mutant("docnos-split-blocks", "garen_infer/index/knn_graph.py",
           "return_self=False, min_block=len(doc_ids))", "return_self=False)",
           ("tests/test_knn_scale.py", "-k", "read_back")),
    Mutant("cache-wal-switch-once", "garen_infer/llm/cache.py",
           "if not _busy(err) or time.monotonic() + pause > deadline:", "if True:",
           ("tests/test_cache_shared.py", "-k", "waits_for_another")),
    Mutant("replay-loads-weights", "garen_infer/llm/backends/transformers_backend.py",
           "        self._loading = threading.Lock()\n", "        self._loading = threading.Lock()\n        self.net  # loaded at once\n",
           ("tests/test_cache.py", "-k", "replay_from_the_cache and transformers")),
    Mutant("served-limit-ignored", "garen_infer/agent/loop.py",
           "        if reply.prompt_limit:", "        if False:",
           ("tests/test_openai_context.py", "-k", "served_agent_keeps")),
    Mutant("context-refusal-stops-run", "garen_infer/llm/backends/openai_backend.py",
           "refused = ContextRefused if err.code == 400", "refused = GarenError if err.code == 400",
           ("tests/test_openai_context.py", "-k", "refused")),
    Mutant("content-parts-uncounted-on-replay", "garen_infer/llm/ledger.py",
           "(bool(extra.get(\"content_not_text\")), CONTENT_NOT_TEXT)", "(False, CONTENT_NOT_TEXT)",
           ("tests/test_openai_faults.py", "-k", "content_parts")),
)


def tracked_copy(into: Path) -> Path:
    """The checkout's tracked files (as they are now, edits included) copied into ``into``."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source, target = REPO / name, into / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return into


def verdict(mutant: Mutant, copy: Path) -> str:
    """'caught', 'survived' or 'gone' (its line is not in the code, exactly once)."""
    path = copy / mutant.path
    original = path.read_text(encoding="utf-8")
    if original.count(mutant.before) != 1:
        return "gone"
    path.write_text(original.replace(mutant.before, mutant.after), encoding="utf-8")
    try:
        env = {**os.environ, "PYTHONPATH": str(copy), "HF_HUB_OFFLINE": "1"}
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *mutant.tests], cwd=copy,
                              env=env, capture_output=True, timeout=TEST_TIMEOUT_S)
        return "survived" if done.returncode == 0 else "caught"
    except subprocess.TimeoutExpired:
        return "caught"  # a hang is noticed too (CI times out)
    finally:
        path.write_text(original, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run these mutants only")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = parser.parse_args()
    chosen = [m for m in MUTANTS if not args.only or m.name in args.only]
    if args.list or not chosen:
        for mutant in MUTANTS:
            print(f"{mutant.name:28s} {mutant.path}  ->  pytest {' '.join(mutant.tests)}")
        return 0 if args.list else 2
    counts = {"caught": 0, "survived": 0, "gone": 0}
    with tempfile.TemporaryDirectory(prefix="garen-mutants-") as folder:
        copy = tracked_copy(Path(folder))
        for mutant in chosen:
            started = time.perf_counter()
            result = verdict(mutant, copy)
            counts[result] += 1
            print(f"[mutants] {mutant.name:28s} {result:8s} {time.perf_counter() - started:6.1f} s  ({mutant.path})", flush=True)
    print(f"[mutants] {counts['caught']} caught, {counts['survived']} survived, {counts['gone']} gone of {len(chosen)}")
    return 0 if counts["caught"] == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
