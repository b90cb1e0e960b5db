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
           ("tests/running/test_scheduler.py", "-k", "max_batch")),
    Mutant("server-one-lane", "garen_infer/running/engine_queue.py",
           "    if not slots or slots <= 1:", "    if not slots or slots >= 1:",
           ("tests/running/test_scheduler.py", "-k", "one_request_per_slot")),
    Mutant("summary-budget-ge", "garen_infer/index/grouping/summaries.py",
           "sum(map(len, words)) > budget_words", "sum(map(len, words)) >= budget_words",
           ("tests/methods/test_fidelity.py", "-k", "summarizer")),
    Mutant("export-identity-name-inode", "garen_infer/llm/exported_models.py",
           "tuple((p.name, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino)", "tuple((p.name, s.st_ino)",
           ("tests/train/test_checkpoint_loading.py", "-k", "in_place")),
    Mutant("shards-sha1", "garen_infer/configuration/shards.py",
           "hashlib.sha256(qid.encode(\"utf-8\"))", "hashlib.sha1(qid.encode(\"utf-8\"))",
           ("tests/configuration/test_shards.py", "-k", "sha256_deal or depends_on_query_ids")),
    Mutant("merge-no-fingerprint", "garen_infer/running/merge.py",
           "config[\"corpus_fingerprint\"] != dataset.fingerprint() or ", "",
           ("tests/configuration/test_shards.py", "-k", "edited_corpus")),
    Mutant("backoff-uncapped", "garen_infer/llm/backends/replicas.py",
           "rest = min(self.backoff * 2 ** (replica.failures - 1), self.max_backoff)",
           "rest = self.backoff * 2 ** (replica.failures - 1)", ("tests/llm/test_openai_replicas.py", "-k", "backoff")),
    Mutant("interval-90", "garen_infer/report/significance.py",
           "tail = (1 - confidence) / 2", "tail = (1 - 0.90) / 2",
           ("tests/report/test_report_paper.py", "-k", "interval")),
    Mutant("ids-with-spaces", "garen_infer/data/validate.py",
           "if any(char.isspace() for char in value):", "if False:", ("tests/data/test_loaders.py",)),
    Mutant("lone-surrogates", "garen_infer/data/validate.py",
           "    if surrogate:", "    if False:", ("tests/data/test_loaders.py",)),
    Mutant("yaml-aliases-unbounded", "garen_infer/configuration/safe_yaml.py",
           "if _expanded_size(node, {}) > MAX_VALUES:", "if False:",
           ("tests/configuration/test_settings.py", "-k", "alias")),
    Mutant("merge-unclaimed", "garen_infer/running/merge.py",
           "        mark_merging(out, paths)\n", "",
           ("tests/configuration/test_shards.py", "-k", "killed and renamed")),
    Mutant("cache-merge-raw-uri", "garen_infer/llm/cache_merge.py",
           "sqlite3.connect(f\"{source.resolve().as_uri()}?mode=ro\"", "sqlite3.connect(f\"file:{source}?mode=ro\"",
           ("tests/llm/test_cache_shared.py", "-k", "uri_characters")),
    Mutant("docnos-split-blocks", "garen_infer/index/knn_graph.py",
           "return_self=False, min_block=len(doc_ids))", "return_self=False)",
           ("tests/index/test_knn_scale.py", "-k", "read_back")),
    Mutant("cache-wal-switch-once", "garen_infer/llm/cache.py",
           "if not _busy(err) or time.monotonic() + pause > deadline:", "if True:",
           ("tests/llm/test_cache_shared.py", "-k", "waits_for_another")),
    Mutant("replay-loads-weights", "garen_infer/llm/backends/transformers_backend.py",
           "        self._loading = threading.Lock()\n",
           "        self._loading = threading.Lock()\n        self.net  # loaded at once\n",
           ("tests/llm/test_cache.py", "-k", "replay_from_the_cache and transformers")),
    Mutant("served-limit-ignored", "garen_infer/agent/loop.py",
           "        if reply.prompt_limit:", "        if False:",
           ("tests/llm/test_openai_context.py", "-k", "served_agent_keeps")),
    Mutant("context-refusal-stops-run", "garen_infer/llm/backends/openai_backend.py",
           "refused = ContextRefused if err.code == 400", "refused = GarenError if err.code == 400",
           ("tests/llm/test_openai_context.py", "-k", "refused")),
    Mutant("content-parts-uncounted-on-replay", "garen_infer/llm/ledger.py",
           "(bool(extra.get(\"content_not_text\")), CONTENT_NOT_TEXT)", "(False, CONTENT_NOT_TEXT)",
           ("tests/llm/test_openai_faults.py", "-k", "content_parts")),
    # seeded in code that survived its tests once: each is now pinned
    Mutant("tree-leaf-row-le", "garen_infer/index/tree/tree_import.py",
           "0 <= int(node_id) < len(doc_ids)", "0 <= int(node_id) <= len(doc_ids)",
           ("tests/index/test_tree_import_safety.py", "-k", "leaf_row_outside")),
    Mutant("tree-any-numpy-name", "garen_infer/index/tree/tree_import.py",
           "if (module, name) in NUMPY_NAMES:", "if module.split(\".\")[0] == \"numpy\":",
           ("tests/index/test_tree_import_safety.py", "-k", "allow_list")),
    Mutant("rewrite-first-think", "garen_infer/running/query_rewrite.py",
           "answer.rsplit(\"</think>\", 1)[1]", "answer.split(\"</think>\", 1)[1]",
           ("tests/running/test_query_rewrite.py", "-k", "last_thought")),
    Mutant("served-count-lt", "garen_infer/llm/backends/openai_backend.py",
           "if served and served != sum(counts):", "if served and served < sum(counts):",
           ("tests/llm/test_openai_yes_no_batches.py", "-k", "another_tokenizer")),
    Mutant("measures-first-only", "garen_infer/evaluation/evaluate.py",
           "parsed.extend(found) if found", "parsed.extend(found[:1]) if found",
           ("tests/doors/test_refused_options.py", "-k", "trec_eval_family")),
    Mutant("matrix-first-cell", "garen_infer/report/matrix.py",
           ".intersection(*answered)", ".intersection(*answered[:1])",
           ("tests/doors/test_refused_options.py", "-k", "shared_queries")),
    Mutant("presets-no-yml", "garen_infer/configuration/presets.py",
           "if path.suffix in (\".yaml\", \".yml\") and path.is_file():",
           "if path.suffix == \".yaml\" and path.is_file():",
           ("tests/doors/test_refused_options.py", "-k", "either_suffix")),
    Mutant("options-no-first-stage", "garen_infer/configuration/option_docs.py",
           "sections = {\"run\": RunConfig, \"first_stage\": FirstStageConfig}", "sections = {\"run\": RunConfig}",
           ("tests/doors/test_refused_options.py", "-k", "preset_section or lists_the_first_stage")),
    Mutant("gzip-by-suffix", "garen_infer/data/validate.py",
           "packed = handle.read(len(GZIP_MAGIC)) == GZIP_MAGIC", "packed = path.suffix == \".gz\"",
           ("tests/data/test_loaders.py", "tests/evaluation/test_evaluate.py")),
    # damaged files, hostile trees, refused options
    Mutant("trace-record-without-key", "garen_infer/storage/append_log.py",
           "if not isinstance(record, dict) or not isinstance(record.get(key), (str, int)):",
           "if not isinstance(record, dict):",
           ("tests/storage/test_append_log.py", "tests/index/test_damaged_files.py", "-k", "trace")),
    Mutant("trace-damage-unreported", "garen_infer/storage/append_log.py", "            if problem:\n",
           "            if False:\n", ("tests/index/test_damaged_files.py", "-k", "damaged_trace")),
    Mutant("run-without-config-resumed", "garen_infer/running/session.py",
           "        if done:\n            raise GarenError(f\"{config_path}: missing",
           "        if False:\n            raise GarenError(f\"{config_path}: missing",
           ("tests/index/test_damaged_files.py", "-k", "without_their_configuration")),
    Mutant("run-of-no-queries", "garen_infer/running/runner.py",
           "    if not queries:\n        raise GarenError(f\"dataset",
           "    if False:\n        raise GarenError(f\"dataset",
           ("tests/index/test_damaged_files.py", "-k", "no_queries")),
    Mutant("trec-nan-accepted", "garen_infer/storage/trec.py",
           "if not math.isfinite(value):", "if math.isinf(value):",
           ("tests/index/test_damaged_files.py", "-k", "finite")),
    Mutant("gzip-unpacked-whole", "garen_infer/data/validate.py",
           "while chunk := unpacking.read(CHUNK_BYTES):", "while chunk := unpacking.read():",
           ("tests/index/test_damaged_files.py", "-k", "bomb")),
    Mutant("vectors-nan-unchecked", "garen_infer/index/file_guard.py",
           "if not np.isfinite(block).all():", "if not np.isfinite(block).any():",
           ("tests/index/test_damaged_files.py", "-k", "nan_or_infinity")),
    Mutant("index-guard-narrow", "garen_infer/index/file_guard.py",
           "    except UNPARSABLE as err:", "    except (ValueError, EOFError) as err:",
           ("tests/index/test_damaged_files.py", "-k", "damaged_at_its_size or every_parse_failure")),
    Mutant("groups-line-unguarded", "garen_infer/index/grouping/groups_format.py",
           "                with reading(f\"{path}, line {line_no}\"):", "                if True:",
           ("tests/index/test_damaged_files.py", "-k", "groups_line")),
    Mutant("short-write-str", "garen_infer/errors.py",
           "if err.errno is None and SHORT_WRITE.search(said):",
           "if err.errno is None and SHORT_WRITE.search(str(err)):",
           ("tests/index/test_damaged_files.py", "-k", "storage_failures")),
    Mutant("enotdir-unnamed", "garen_infer/errors.py", "if err.errno == errno.ENOTDIR or (", "if (",
           ("tests/index/test_damaged_files.py", "-k", "storage_failures or under_a_file")),
    Mutant("affinity-ignored", "garen_infer/llm/backends/replicas.py",
           "key = _AFFINITY.get() if len(self.replicas) > 1 else None", "key = None",
           ("tests/llm/test_openai_replicas.py", "-k", "home_replica")),
    Mutant("home-saturation-gt", "garen_infer/llm/backends/replicas.py",
           "if home.in_flight >= self.concurrency:", "if home.in_flight > self.concurrency:",
           ("tests/llm/test_openai_replicas.py", "-k", "saturated_home")),
    Mutant("data-parallel-one-rank", "garen_infer/llm/backends/vllm_limits.py",
           "return self.max_num_seqs * self.data_parallel_size", "return self.max_num_seqs",
           ("tests/llm/test_vllm_limits.py", "-k", "ranks_take_requests_together")),
    Mutant("data-parallel-offline-two", "garen_infer/llm/backends/vllm_limits.py",
           "if data_parallel_size > 1 and engine == \"offline\":",
           "if data_parallel_size > 2 and engine == \"offline\":",
           ("tests/llm/test_vllm_limits.py", "-k", "offline_engine_is_refused")),
    Mutant("kv-without-values", "garen_infer/llm/backends/vllm_limits.py",
           "* head * 2 * dtype_bytes", "* head * dtype_bytes",
           ("tests/llm/test_vllm_limits.py", "-k", "kv_cache_and_linear")),
    Mutant("stop-ids-tokenizer-only", "garen_infer/llm/backends/vllm_backend.py",
           "ids.update([listed] if isinstance(listed, int) else listed or [])", "ids.update([])",
           ("tests/llm/test_vllm_limits.py", "-k", "every_stop_id")),
    Mutant("stop-id-inside-kept", "garen_infer/llm/backends/vllm_backend.py",
           "cut = next((k for k, token in enumerate(tokens) if token in stop_ids), len(tokens))", "cut = len(tokens)",
           ("tests/llm/test_vllm_limits.py", "-k", "output_tokens_are_counted")),
    Mutant("in-flight-kv-unwarned", "garen_infer/llm/backends/vllm_limits.py",
           "if min(in_flight, takes) > holds:", "if min(in_flight, takes) > holds * 4:",
           ("tests/llm/test_vllm_limits.py", "-k", "one_warning")),
    Mutant("task-server-any-model", "garen_infer/running/task_server.py",
           "            if model in listed:", "            if listed:",
           ("tests/running/test_task_server.py",)),
    Mutant("task-server-owner-unchecked", "garen_infer/running/task_server.py",
           "[0]))) is False:", "[0]))) is None:",
           ("tests/running/test_task_server.py", "-k", "another_tasks_server")),
    Mutant("adaptive-ties-unaveraged", "garen_infer/methods/garen_adaptive.py",
           "return (first + (counts - 1) / 2.0)[inverse]", "return (first + 0 * counts)[inverse]",
           ("tests/methods/test_garen_adaptive_arithmetic.py",)),
    Mutant("adaptive-reliability-unshrunk", "garen_infer/methods/garen_adaptive.py",
           "return 0.0 if rho is None else max(0.0, rho) * m / (m + M0)",
           "return 0.0 if rho is None else max(0.0, rho)",
           ("tests/methods/test_garen_adaptive_arithmetic.py",)),
    Mutant("adaptive-exploit-at-once", "garen_infer/methods/garen_adaptive.py",
           "(t > 1 and best_group is not None", "(t > 0 and best_group is not None",
           ("tests/methods/test_garen_adaptive_arithmetic.py",)),
    Mutant("interleave-navigator-twice", "garen_infer/methods/garen_adaptive.py",
           "pattern = [0] + [1] * per_first", "pattern = [0, 0] + [1] * per_first",
           ("tests/methods/test_garen_adaptive.py", "-k", "interleave_gives")),
    Mutant("reranker-labels-any-judged", "garen_train/mining/pairs.py",
           "winners = {g for r in ranking[:top] for g in doc_groups[r]}",
           "winners = {g for r in ranking for g in doc_groups[r]}",
           ("tests/methods/test_garen_adaptive.py", "-k", "reranker_labels")),
    Mutant("tree-self-child-only", "garen_infer/index/tree/tree_import.py",
           "if id(child) in seen:", "if child is node:", ("tests/index/test_tree_import_safety.py", "-k", "own_child")),
    Mutant("tree-coverage-unchecked", "garen_infer/index/tree/tree_import.py",
           "if len(rows) < len(doc_ids):", "if not rows:",
           ("tests/index/test_tree_import_safety.py", "-k", "exactly_once")),
    Mutant("tree-desc-untyped", "garen_infer/index/tree/tree_import.py",
           "    if not isinstance(desc, str):", "    if isinstance(desc, (list, tuple)):",
           ("tests/index/test_tree_import_safety.py", "-k", "wrong_type")),
    Mutant("tree-bytes-uncapped", "garen_infer/index/tree/tree_import.py",
           "    if len(data) > max_bytes:", "    if len(data) > max_bytes << 20:",
           ("tests/index/test_tree_import_safety.py", "-k", "larger_than")),
    Mutant("cutoff-zero", "garen_infer/evaluation/evaluate.py",
           "or cutoff < 1):", "or cutoff < 0):", ("tests/doors/test_refused_options.py", "-k", "cutoff_below")),
    Mutant("runs-parents-unchecked", "garen_infer/report/bench.py",
           "for folder in (runs, *runs.parents):", "for folder in (runs,):",
           ("tests/doors/test_refused_options.py", "-k", "inside_an_index or inside_any")),
    Mutant("tree-depth-negative", "garen_infer/doors/cli.py",
           "tree.add_argument(\"--depth\", type=at_least(0)", "tree.add_argument(\"--depth\", type=int",
           ("tests/doors/test_refused_options.py", "-k", "tree_depth")),
    Mutant("other-model-prefix", "garen_infer/llm/backends/openai_backend.py",
           "named.startswith(asked + \"-\")", "named.startswith(asked)",
           ("tests/llm/test_openai_faults.py", "-k", "dated_or_vendor")),
    Mutant("other-model-uncounted", "garen_infer/llm/backends/openai_backend.py",
           "        return [OTHER_MODEL]\n", "        return []\n",
           ("tests/llm/test_openai_faults.py", "-k", "another_model")),
    Mutant("max-tokens-unbounded", "garen_infer/llm/types.py",
           "Annotated[int, Between(1, MAX_ANSWER_TOKENS)]", "Annotated[int, Range(low=1)]",
           ("tests/llm/test_openai_faults.py", "-k", "max_tokens_outside")),
    Mutant("rewrite-garbage-used", "garen_infer/running/query_rewrite.py",
           "            if not hits:  # nothing usable", "            if text is None:  # nothing usable",
           ("tests/running/test_query_rewrite.py", "-k", "no_search_can_use")),
    # what a newcomer is told: smoke reports, trec_eval's conventions, GAREN's notice and trace
    Mutant("smoke-report-over-full", "garen_infer/report/bench.py",
           'return report.with_name(f"{report.name}.first{limit}")', "return report",
           ("tests/report/test_bench.py", "-k", "limited_bench")),
    Mutant("unranked-num-q-zero", "garen_infer/evaluation/evaluate.py",
           '    if measure.NAME == "NumQ":\n        return 1.0', '    if measure.NAME == "NumQ":\n        return 0.0',
           ("tests/evaluation/test_trec_eval_output.py", "-k", "no_name_for")),
    Mutant("trec-eval-asked-order", "garen_infer/evaluation/evaluate.py",
           "for name in sorted(values, key=lambda n: _trec_eval_rank(names[n]))", "for name in values",
           ("tests/evaluation/test_trec_eval_output.py",)),
    Mutant("garen-notice-per-query", "garen_infer/running/session.py",
           'if line and self.__dict__.get("_noticed") != line:', "if line:",
           ("tests/methods/test_garen_notice.py", "-k", "python_session")),
    Mutant("garen-notice-at-window-plus-one", "garen_infer/methods/garen.py",
           "if budget is None or budget > c.window:", "if budget is None or budget > c.window + 1:",
           ("tests/methods/test_garen_notice.py", "-k", "above_the_window")),
    Mutant("demo-trace-unfolded", "garen_infer/doors/demo.py",
           "if said and said[-1][1] == text:", "if False:", ("tests/doors/test_demo.py", "-k", "folds")),
)


def tracked_copy(into: Path) -> Path:
    """The checkout's tracked files (as they are now, edits included) copied into ``into``."""
    files = (
        subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
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
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                               *mutant.tests], cwd=copy,
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
            print(f"[mutants] {mutant.name:28s} {result:8s} {time.perf_counter() - started:6.1f} s  "
                  f"({mutant.path})", flush=True)
    print(f"[mutants] {counts['caught']} caught, {counts['survived']} survived, {counts['gone']} gone of {len(chosen)}")
    return 0 if counts["caught"] == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
