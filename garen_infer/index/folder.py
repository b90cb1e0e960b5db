"""An index folder: one directory, one ``manifest.json`` saying what built each stage and for which corpus.

An index built for another corpus (different fingerprint) or with other params is refused with a message
that says how to rebuild; stages already built with the same params are kept, so an interrupted build resumes.
A stage's identity is the params that change its result (``settings.identity``): another device, batch size or
chunk size keeps it. The manifest records each stage's files (size and digest, ``stage_files.py``); a file that
is missing, cut short or replaced, or an entry edited by hand, is refused on open and rebuilt by the next build.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from functools import cached_property
from pathlib import Path

import numpy as np

from garen_infer.data.dataset import Dataset
from garen_infer.errors import GarenError
from garen_infer.index import stage_files
from garen_infer.index.file_guard import REBUILD, load_vectors, reading
from garen_infer.index.stages import STAGES, IndexConfig, calls_generator, load_optional_stages, stage_outputs
from garen_infer.llm.embeddings import release_encoders
from garen_infer.settings import identity
from garen_infer.storage.atomic import write_json, write_text
from garen_infer.storage.writer_lock import writer_lock

FORMAT = 2  # 2: every stage entry records its files and seal, and the manifest records doc_ids.json
DOC_IDS = "doc_ids.json"


def _in_build_order(stages: dict) -> list[str]:
    """The preset's stages in its order, except that each comes after the stages it requires."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in stages and name not in order:
            for required in STAGES[name].requires:
                visit(required)
            order.append(name)

    for name in stages:
        visit(name)
    return order


def completed_params(params_type: type, recorded: dict) -> dict:
    """A stage's recorded params, a field the manifest does not record read as its default."""
    return {**asdict(params_type()), **recorded}


def same_result(params_type: type, recorded: dict, wanted: dict) -> bool:
    """Whether a stage built with ``recorded`` params is the stage ``wanted`` asks for: equal in every setting that
    changes the result (a lower batch size after running out of memory keeps what was built)."""
    return identity(params_type, completed_params(params_type, recorded)) == identity(params_type, wanted)


NOTHING_SHARDS = ("--shard: no stage of this preset asks a model for prompts that shard (the group "
                  "summaries, the top-down tree's document summaries); build the index without --shard")


def _built_as(folder: IndexFolder, name: str, params) -> bool:
    """Whether ``folder`` holds stage ``name`` as ``params`` (None: any params) build it."""
    if not folder.has(name):
        return False
    recorded = folder.manifest["stages"][name]["params"]
    return params is None or same_result(type(params), recorded, asdict(params))


def _answer_shards(folder: IndexFolder, dataset: Dataset, config: IndexConfig, shard: tuple[int, int],
                   log) -> list[dict]:
    """Each stage of ``config`` that shards and asks a model: its shard ``shard``, once the stages it reads
    are built."""
    stages = config.stages
    sharded = [n for n in _in_build_order(stages) if STAGES[n].shard and calls_generator(stages[n])]
    if not sharded:
        raise GarenError(NOTHING_SHARDS)
    done, waiting = [], {}
    for name in sharded:
        if _built_as(folder, name, stages[name]):
            log(f"[index] {name}: already built with these params, nothing to shard")
            continue
        unbuilt = [r for r in STAGES[name].requires if not _built_as(folder, r, stages.get(r))]
        if unbuilt:
            waiting[name] = unbuilt
            log(f"[index] {name}: reads {', '.join(unbuilt)}, not built yet; shard it once they are")
            continue
        answer = STAGES[name].shard
        assert answer is not None  # sharded lists only stages that shard
        facts = answer(folder, dataset, stages[name], shard, log)  # None: not with these params (bottom-up)
        done += [facts] if facts is not None else []
    if not done and waiting:
        raise _waiting(folder, shard, waiting, sharded)
    if not done and not any(_built_as(folder, n, stages[n]) for n in sharded):
        raise GarenError(NOTHING_SHARDS)
    return done


def _waiting(folder: IndexFolder, shard: tuple[int, int], waiting: dict, sharded: list[str]) -> GarenError:
    """Why no stage could shard: the first one's unbuilt inputs, and the command that builds them."""
    name, unbuilt = next(iter(waiting.items()))
    merged = unbuilt[0] in sharded
    first = ("merge the shards of " if merged else "build ") + ", ".join(unbuilt)
    how = "--merge-shards" if merged else "--shard-prefix"
    return GarenError(f"--shard {shard[0]}/{shard[1]}: stage '{name}' reads stage(s) {', '.join(unbuilt)}, "
                      f"which {folder.path} lacks (or holds with other params); {first} first ('garen-infer "
                      f"index {how}' with this preset)")


class IndexFolder:
    def __init__(self, path: Path, manifest: dict):
        self.path, self.manifest = Path(path), manifest
        self.build_actions: dict[str, tuple[str, float]] = {}  # stage -> (built | rebuilt, seconds) by the last build
        self.merging_shards = False  # the sharded stages take their answers from their shards (merge_shards)

    # ---- opening and building -------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, dataset: Dataset | None = None, check_files: bool = True) -> IndexFolder:
        """The index at ``path``, its files checked against the manifest (cheap: presence and sizes) and, given a
        ``dataset``, its corpus and document ids against the dataset's."""
        path = Path(path)
        manifest_path = path / "manifest.json"
        if not manifest_path.is_file():
            raise GarenError(f"{path}: not an index folder (no manifest.json); build one with 'garen-infer index'")
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise GarenError(f"{manifest_path}: unreadable manifest ({err}); rebuild the index with "
                             "'garen-infer index --force'") from None
        if manifest.get("format") != FORMAT:
            raise GarenError(f"{manifest_path}: index format {manifest.get('format')} is not {FORMAT}, the one this "
                             f"release reads; rebuild it with 'garen-infer index --force' and the preset that built it")
        folder = cls(path, manifest)
        if check_files:
            folder.check_files()
        if dataset is not None:
            folder.check_corpus(dataset)
        return folder

    def check_corpus(self, dataset: Dataset) -> None:
        corpus = self.manifest["corpus"]
        if corpus["fingerprint"] != dataset.fingerprint():
            raise GarenError(
                f"{self.path}: this index was built for corpus '{corpus['name']}' ({corpus['doc_count']} documents, "
                f"{corpus['fingerprint']}), not for '{dataset.name}' ({len(dataset.documents)} documents, "
                f"{dataset.fingerprint()}); index this dataset into another folder ('garen-infer index --out "
                f"<a new folder>'), or replace this index with 'garen-infer index --force'"
            )
        if self.doc_ids != dataset.doc_ids:  # every stage's rows follow this order: swapped ids swap documents
            raise GarenError(f"{self.path / DOC_IDS}: the document ids are not the corpus's, in its order; {REBUILD}")

    def check_files(self) -> None:
        """Refuse, in one line, an index whose files are not what its manifest records (presence, sizes, seals)."""
        problem = self._doc_ids_damage()
        for name, entry in self.manifest["stages"].items():
            problem = problem or stage_files.damage(self.path, name, entry)
        if problem:
            raise GarenError(f"{self.path}: damaged index: {problem}; {REBUILD}")

    def verify(self, log=print) -> int:
        """Read every recorded file and compare its digest: the number of files verified, or one ``GarenError``
        line for the first that differs."""
        self.check_files()
        problem = stage_files.digest_problem(self.path, DOC_IDS, self.manifest["doc_ids"])
        if problem:  # the next build writes it again from the corpus
            raise GarenError(f"{self.path}: damaged index: {problem}; {REBUILD}")
        checked = 1
        for name, entry in self.manifest["stages"].items():
            for rel, file in entry["files"].items():
                problem = stage_files.digest_problem(self.path, rel, file)
                if problem:
                    raise GarenError(f"{self.path}: damaged index: {problem} (stage '{name}'); rebuild it with "
                                     f"'garen-infer index --force' and the preset that built it")
            checked += len(entry["files"])
            log(f"[verify] {name}: {len(entry['files'])} file(s) as built")
        return checked

    def _doc_ids_damage(self) -> str | None:
        return stage_files.size_problem(self.path, DOC_IDS, self.manifest["doc_ids"])

    @classmethod
    def build(cls, dataset: Dataset, path: str | Path, config: IndexConfig, force: bool = False, log=print,
              merge_shards: bool = False) -> IndexFolder:
        """Build (or complete) the index at ``path``; no other process may write it meanwhile.
        ``merge_shards``: the stages that shard take their model answers from the shards of ``build_shard``
        (all of them, finished)."""
        with writer_lock(path, "index folder"):
            return cls._build(dataset, Path(path), config, force, log, merge_shards)

    @classmethod
    def build_shard(cls, dataset: Dataset, path: str | Path, config: IndexConfig, shard: tuple[int, int],
                    log=print) -> list[dict]:
        """Answer shard ``shard`` (I, N) of the model prompts of every stage of ``config`` that shards, into
        ``path``'s ``shards/``; the stages they read must be built already (``model_free``), and the index
        folder itself is only read, so N shards run at once. What each sharded stage did, one dict each."""
        load_optional_stages()
        if not (Path(path) / "manifest.json").is_file():
            raise GarenError(f"{path}: not an index folder yet; build the stages the shards read once first, "
                             f"with 'garen-infer index --shard-prefix' and this preset")
        folder = cls.open(path, dataset)
        return _answer_shards(folder, dataset, config, shard, log)

    @classmethod
    def _open_to_build(cls, path: Path, force: bool) -> IndexFolder | None:
        """The index already at ``path``, or None for a new one; with ``force`` a manifest that is unreadable or of
        another format starts a new index instead of being refused."""
        if not (path / "manifest.json").is_file():
            return None
        try:
            return cls.open(path, check_files=False)
        except GarenError:
            if force:
                return None
            raise

    @classmethod
    def _build(cls, dataset: Dataset, path: Path, config: IndexConfig, force: bool, log,
               merge_shards: bool = False) -> IndexFolder:
        load_optional_stages()
        corpus = {"name": dataset.name, "fingerprint": dataset.fingerprint(), "doc_count": len(dataset.documents)}
        folder = cls._open_to_build(path, force)
        if folder is not None and folder.manifest["corpus"]["fingerprint"] != corpus["fingerprint"]:
            if not force:
                folder.check_corpus(dataset)  # refuses, naming both corpora
            folder = None  # --force on another corpus: every stage is stale
        if folder is None:
            path.mkdir(parents=True, exist_ok=True)
            folder = cls(path, {"format": FORMAT, "corpus": corpus, "stages": {}})
            folder._write_doc_ids(dataset)
        elif folder._doc_ids_damage() or folder._read_doc_ids() != dataset.doc_ids:
            log(f"[index] {DOC_IDS}: not the corpus's ids, written again")
            folder._write_doc_ids(dataset)
        folder._drop_damaged(log)
        folder.merging_shards = merge_shards
        for name in config.stages:  # a stage's inputs come from this build or from the folder already
            missing = [r for r in STAGES[name].requires if r not in config.stages and not folder.has(r)]
            if missing:
                raise GarenError(f"index stage '{name}' needs stage(s) {', '.join(missing)}: add them to the preset")
        for name in _in_build_order(config.stages):
            params = config.stages[name]
            recorded = folder.manifest["stages"].get(name)
            wanted = asdict(params)
            if recorded and same_result(type(params), recorded["params"], wanted) and not force:
                built = completed_params(type(params), recorded["params"])
                other = [key for key, value in wanted.items() if built.get(key) != value]
                log(f"[index] {name}: already built with these params, kept" if not other else
                    f"[index] {name}: already built; {', '.join(other)} only change(s) how it runs, not the "
                    "result: kept")
                continue
            if recorded:
                log(f"[index] {name}: params changed, rebuilding")
                del folder.manifest["stages"][name]  # untrusted until rebuilt: a kill mid-build leaves no claim
                folder._forget_dependents(name)
                folder._save_manifest()
            log(f"[index] {name}: building")
            start = time.perf_counter()
            info = STAGES[name].build(folder, dataset, params)
            folder.build_actions[name] = ("rebuilt" if recorded else "built", round(time.perf_counter() - start, 2))
            folder.manifest["stages"][name] = folder.sealed_entry(name,
                                                                  {"params": wanted, "info": info,
                                                                   "built": time.strftime("%Y-%m-%dT%H:%M:%S")})
            folder._forget_dependents(name)
            folder._save_manifest()
            folder.__dict__.pop(name, None)
            folder.__dict__.pop("_groups", None)
            # each stage loads its own models: the embedder of one must not hold the GPU the next one's LLM needs
            folder.__dict__.pop("embedder", None)
            folder.__dict__.pop("_encoders", None)
            release_encoders()
        return folder

    def sealed_entry(self, name: str, entry: dict) -> dict:
        """A stage's manifest entry with its files (sizes, digests) and seal: call it once the stage is written."""
        return stage_files.sealed(self.path, stage_outputs(name), entry)

    def _write_doc_ids(self, dataset: Dataset) -> None:
        write_text(self.path / DOC_IDS, json.dumps(dataset.doc_ids))
        self.manifest["doc_ids"] = stage_files.record(self.path, (DOC_IDS,))[DOC_IDS]
        self.__dict__.pop("doc_ids", None)
        self.__dict__.pop("row_of_id", None)
        self._save_manifest()

    def _drop_damaged(self, log) -> None:
        """Stages whose files or entry fail the cheap checks are no longer claimed (a preset that names them
        rebuilds them), nor is anything built from them."""
        for name in list(self.manifest["stages"]):
            problem = self.has(name) and stage_files.damage(self.path, name, self.manifest["stages"][name])
            if problem:
                log(f"[index] {name}: {problem}; no longer trusted, rebuilt if the preset names it")
                del self.manifest["stages"][name]
                self._forget_dependents(name)
                self._save_manifest()

    def _forget_dependents(self, name: str) -> None:
        """Stages built from an older ``name`` are stale: drop them so they are rebuilt, never trusted. A stage
        written under a name no module registers (``garen-train export --stage groups_<name>``) records what it
        was made from in its manifest entry's ``requires``."""
        for other in list(self.manifest["stages"]):
            requires = STAGES[other].requires if other in STAGES else self.manifest["stages"][other].get("requires", ())
            if name in requires and self.has(other):
                del self.manifest["stages"][other]
                self._forget_dependents(other)

    def _save_manifest(self) -> None:
        write_json(self.path / "manifest.json", self.manifest)

    # ---- reading stages -------------------------------------------------------------------------------------
    def has(self, stage: str) -> bool:
        return stage in self.manifest["stages"]

    def require(self, stage: str, why: str) -> dict:
        if not self.has(stage):
            from garen_infer.shipped import presets_with_stage

            having = presets_with_stage(stage)
            example = (
                f"e.g. 'garen-infer index --preset {having[0]}'"
                if having
                else f"one whose index section has {stage}"
            )
            raise GarenError(f"{self.path}: {why} needs the index stage '{stage}', which this index lacks; "
                             f"rebuild with a preset that includes it ({example})")
        return self.manifest["stages"][stage]["params"]

    def params(self, stage: str):
        load_optional_stages()
        return STAGES[stage].params_type(**self.require(stage, "this method"))

    @cached_property
    def doc_ids(self) -> list[str]:
        ids = self._read_doc_ids()
        if ids is None:
            raise GarenError(f"{self.path / DOC_IDS}: missing or unreadable; {REBUILD}")
        return ids

    def _read_doc_ids(self) -> list[str] | None:
        try:
            ids = json.loads((self.path / DOC_IDS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return ids if isinstance(ids, list) else None

    @cached_property
    def row_of_id(self) -> dict[str, int]:
        """Corpus row by document id (the order of doc_ids.json)."""
        return {d: i for i, d in enumerate(self.doc_ids)}

    @cached_property
    def bm25(self):
        from garen_infer.index.lexical.bm25 import Bm25Index

        self.require("bm25", "BM25 first-stage retrieval")
        with reading(self.path / "bm25"):
            return Bm25Index.load(self.path / "bm25")

    @cached_property
    def embeddings(self) -> np.ndarray:
        self.require("embeddings", "dense retrieval")
        return load_vectors(self.path / "embeddings.npy")

    def vectors(self, stage: str) -> np.ndarray:
        """The document vectors of an embedding stage (``embeddings`` or ``first_stage_embeddings``)."""
        if stage == "embeddings":
            return self.embeddings
        self.require(stage, "dense retrieval")
        return load_vectors(self.path / f"{stage}.npy")

    @cached_property
    def knn_graph(self):
        from garen_infer.index.knn_graph import KnnGraph

        self.require("knn_graph", "graph expansion")
        with reading(self.path / "knn_graph"):
            return KnnGraph.load(self.path / "knn_graph")

    @cached_property
    def proximity_graph(self):
        from garen_infer.index.proximity_graph import ProximityGraph

        self.require("proximity_graph", "reranker-guided search")
        with reading(self.path / "proximity_graph"):
            return ProximityGraph.load(self.path / "proximity_graph")

    def groups(self, stage: str = "groups"):
        """GAREN's groups and summaries from stage ``groups`` (or ``groups_kmeans`` / ``groups_random``)."""
        loaded = self.__dict__.setdefault("_groups", {})
        if stage not in loaded:
            from garen_infer.index.grouping.groups import Groups

            self.require(stage, "GAREN")
            loaded[stage] = Groups.load(self.path / stage, self.row_of_id)
        return loaded[stage]

    @cached_property
    def embedder(self):
        return self.encoder("embeddings")

    def encoder(self, stage: str):
        """The query model of an embedding stage, loaded once, its ``{instruction}`` the corpus's task's."""
        from garen_infer.index.task_instructions import task_instruction
        from garen_infer.llm.embeddings import Embedder
        from garen_infer.llm.vector_cache import attach

        loaded = self.__dict__.setdefault("_encoders", {})
        if stage in loaded:
            return loaded[stage]
        embedder = Embedder(self.params(stage), task_instruction(self.manifest["corpus"]["name"]))
        built = self.manifest["stages"][stage]["info"].get("dim")
        if built and embedder.dim and embedder.dim != built:  # e.g. vectors imported from another model
            raise GarenError(f"{self.path}: the documents' vectors have {built} dimensions but the query model "
                             f"'{embedder.params.model}' makes {embedder.dim}; set index.{stage}.model "
                             f"to the model that made the vectors and rebuild")
        if "_vector_store" in self.__dict__:
            attach(embedder, self.__dict__["_vector_store"])
        loaded[stage] = embedder
        return embedder

    def cache_vectors_in(self, cache) -> None:
        """The query and text vectors of this index's embedding models are kept in ``cache`` (the response
        cache, llm/vector_cache.py), for the models loaded already and those loaded later."""
        from garen_infer.llm.vector_cache import attach

        self.__dict__["_vector_store"] = cache
        for embedder in self.__dict__.get("_encoders", {}).values():
            attach(embedder, cache)
