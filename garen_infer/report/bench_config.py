"""The bench file: which methods, budgets and datasets ``garen-infer bench`` runs, and where it writes.

    preset: cpu-default            # models, first stage and method defaults of every cell (a name or a YAML path)
    set: [run.max_active_queries=8]  # --set overrides of that preset (optional)
    budgets: [100, 300, 500]       # Reranker@k; a method without a budget (bm25) runs once
    datasets:                      # name -> dataset spec and index folder
      scifact: {spec: "beir:../shared/data/scifact:test", index: indexes/scifact,
                runs: {bm25-anserini: runs/anserini/scifact.trec}}   # TREC run files of other systems (optional):
                                   # rows without a budget or cost, usable as the baseline
      cranfield: {spec: "beir:../shared/data/cranfield:test", index: indexes/cranfield, allow_empty_docs: true}
    build_index: false             # true: first build (or complete) each index with the presets' index stages
    methods:                       # registered names, "all", or entries with their own label, preset and overrides
      - all                        # every registered method not listed under its own label below; one whose
                                   # roles the preset has no model for (RARG's agent on cpu-default) is listed, not run
      - {method: garen, label: garen-connectivity, set: [methods.garen.navigator=connectivity]}
      - {method: rarg, preset: rarg-cpu, limit: 20, budgets: []}
    skip_unavailable: false        # true: a cell whose method lacks a model or index stage is listed, not run
    measures: [nDCG@10, R@100]     # ir_measures strings; the first is the one cost and significance tables use
    baseline: rerank               # every cell is compared with this label at the same budget (paired tests)
    significance: {alpha: 0.05, permutations: 10000, seed: 0, correction: holm, bootstrap: 10000}
                                   # correction: holm (over each dataset's comparisons per measure) or none (the
                                   # GAREN paper's uncorrected t-test); bootstrap: resamples of the 1 - alpha CIs
    prices:                        # dollars per million tokens per role (GAREN Table 7); else models.<role>.price
      reranker: {input_per_million: 0.10, output_per_million: 1.00}
    runs: bench/runs               # run folders: <runs>/<dataset>/<label>@<budget>
    report: bench/report           # the report folder
    figure_formats: [png, pdf, svg]  # PNG always (the HTML and Markdown show it); PDF and SVG for papers

Relative paths are read from the current directory, like every other ``garen-infer`` path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from garen_infer.errors import GarenError
from garen_infer.evaluation.costs import TokenPrices
from garen_infer.evaluation.evaluate import DEFAULT_MEASURES, measure_names
from garen_infer.settings import did_you_mean

ALL = "all"
CORRECTIONS = ("holm", "none")
FIGURE_FORMATS = ("png", "pdf", "svg")


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    spec: str
    index: Path
    allow_empty_docs: bool = False
    runs: dict[str, Path] = field(default_factory=dict)  # label -> a TREC run file made by another system


@dataclass(frozen=True)
class MethodEntry:
    method: str  # a name registered in garen_infer.methods.base.METHODS
    label: str  # the row name in tables and the run folder name; unique
    preset: str | None = None  # None: the bench's preset
    overrides: tuple[str, ...] = ()  # --set items applied after the bench's own
    budgets: tuple[int, ...] | None = None  # None: the bench's budgets
    limit: int | None = None  # only the first N judged queries
    from_all: bool = False  # expanded from 'all': skipped (and listed) where the preset has no model for its roles


@dataclass(frozen=True)
class Significance:
    alpha: float = 0.05  # GAREN Table 1: p < 0.05
    permutations: int = 10_000  # sign patterns of the randomisation test (above 16 queries)
    seed: int = 0
    # Holm per dataset and measure over the bench's methods (run files apart); "none": as the paper
    correction: str = "holm"
    bootstrap: int = 10_000  # resamples of the confidence intervals (level 1 - alpha)


@dataclass
class BenchConfig:
    path: Path
    text: str  # the file as written, kept in the report
    preset: str
    overrides: tuple[str, ...]
    budgets: tuple[int, ...]
    datasets: list[DatasetEntry]
    methods: list[MethodEntry | str]  # ALL is expanded against the registry when the bench plans its cells
    runs: Path
    report: Path
    build_index: bool = False
    skip_unavailable: bool = False
    baseline: str | None = None
    significance: Significance = field(default_factory=Significance)
    prices: dict[str, TokenPrices] = field(default_factory=dict)
    measures: tuple[str, ...] = DEFAULT_MEASURES
    figure_formats: tuple[str, ...] = FIGURE_FORMATS

    def method_entries(self, registered) -> list[MethodEntry]:
        """The entries with ``all`` expanded: every registered method whose name is not already a label."""
        labels = {m.label for m in self.methods if isinstance(m, MethodEntry)}
        out: list[MethodEntry] = []
        for item in self.methods:
            if item == ALL:
                out += [MethodEntry(name, name, from_all=True) for name in registered if name not in labels]
            else:
                assert isinstance(item, MethodEntry)  # ALL is the one name an entry holds as a string
                out.append(item)
        seen: set[str] = set()
        for entry in out:
            if entry.label in seen:
                raise GarenError(f"{self.path}: method label '{entry.label}' appears twice; give one entry "
                                 "another 'label'")
            seen.add(entry.label)
        for dataset in self.datasets:
            for label in dataset.runs:
                if label in seen:
                    raise GarenError(f"{self.path}: datasets.{dataset.name}.runs: label '{label}' is also a "
                                     "method's; give the run file another label")
        return out


def load_bench_config(path: str | Path, overrides: Sequence[str] = ()) -> BenchConfig:
    """Read a bench file; ``overrides`` are ``--set`` items on it, e.g. ``budgets=[100]`` or
    ``datasets.scifact.spec=beir:/data/scifact:test``."""
    from garen_infer.configuration.presets import read_yaml_mapping

    path = Path(path)
    if not path.is_file():
        raise GarenError(f"{path}: no such bench file")
    return parse_bench_config(read_yaml_mapping(path, overrides), path, path.read_text(encoding="utf-8"))


def parse_bench_config(raw: dict, path: Path, text: str = "") -> BenchConfig:
    where = str(path)
    if not isinstance(raw, dict):
        raise GarenError(f"{where}: expected a mapping at the top level")
    known = {"preset", "set", "budgets", "datasets", "methods", "runs", "report", "build_index", "skip_unavailable",
             "baseline", "significance", "prices", "measures", "figure_formats"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise GarenError(f"{where}: unknown key(s) "
                         f"{', '.join(unknown)}{did_you_mean(unknown[0], sorted(known))}; known: "
                         f"{', '.join(sorted(known))}")
    for key in ("datasets", "methods", "runs", "report"):
        if not raw.get(key):
            raise GarenError(f"{where}: '{key}' is required")
    config = BenchConfig(
        path=path, text=text, preset=str(raw.get("preset", "cpu-default")),
        overrides=_strings(raw.get("set"), f"{where}: set"),
        budgets=_budgets(raw.get("budgets", []), f"{where}: budgets"),
        datasets=[
            _dataset(name, value, where)
            for name, value in _mapping(raw["datasets"], f"{where}: datasets").items()
        ],
        methods=[
            _method(item, f"{where}: methods[{i}]")
            for i, item in enumerate(_list(raw["methods"], f"{where}: methods"))
        ],
        runs=Path(raw["runs"]), report=Path(raw["report"]),
        build_index=_bool(raw.get("build_index", False), f"{where}: build_index"),
        skip_unavailable=_bool(raw.get("skip_unavailable", False), f"{where}: skip_unavailable"),
        baseline=None if raw.get("baseline") is None else str(raw["baseline"]),
        significance=_dataclass(Significance, raw.get("significance") or {}, f"{where}: significance"),
        prices={role: _dataclass(TokenPrices, value, f"{where}: prices.{role}")
                for role, value in _mapping(raw.get("prices") or {}, f"{where}: prices").items()},
        measures=_measures(raw.get("measures", list(DEFAULT_MEASURES)), f"{where}: measures"),
        figure_formats=_figure_formats(raw.get("figure_formats", list(FIGURE_FORMATS)), f"{where}: figure_formats"),
    )
    significance = config.significance
    if significance.permutations < 1 or significance.bootstrap < 1 or not 0 < significance.alpha < 1:
        raise GarenError(f"{where}: significance needs permutations >= 1, bootstrap >= 1 and 0 < alpha < 1")
    if significance.correction not in CORRECTIONS:
        raise GarenError(f"{where}: significance.correction must be one of {', '.join(CORRECTIONS)}, not "
                         f"'{significance.correction}'")
    return config


def _measures(value, where: str) -> tuple[str, ...]:
    items = _list(value, where)
    if not items:
        raise GarenError(f"{where}: name at least one measure, e.g. [nDCG@10, R@100]")
    try:
        return measure_names(items)
    except GarenError as err:
        raise GarenError(f"{where}: {err}") from None


def _figure_formats(value, where: str) -> tuple[str, ...]:
    items = [str(v).lower().lstrip(".") for v in _list(value, where)]
    unknown = [f for f in items if f not in FIGURE_FORMATS]
    if unknown:
        raise GarenError(f"{where}: unknown format(s) {', '.join(unknown)}; choose from {', '.join(FIGURE_FORMATS)}")
    return tuple(dict.fromkeys(["png", *items]))  # the report pages show the PNGs


def _dataset(name, value, where: str) -> DatasetEntry:
    value = _mapping(value, f"{where}: datasets.{name}")
    problem = sorted(set(value) - {"spec", "index", "allow_empty_docs", "runs"})
    if problem or "spec" not in value or "index" not in value:
        raise GarenError(f"{where}: datasets.{name} needs 'spec' and 'index' (and optionally "
                         f"'allow_empty_docs', 'runs'), got {', '.join(sorted(value))}")
    if "/" in str(name) or not str(name):
        raise GarenError(f"{where}: dataset name '{name}' cannot be empty or contain '/' (it names a folder)")
    runs = {str(label): Path(str(file)) for label, file in _mapping(value.get("runs") or {},
                                                                    f"{where}: datasets.{name}.runs").items()}
    for label, file in runs.items():
        if "/" in label or not label:
            raise GarenError(f"{where}: datasets.{name}.runs: label '{label}' cannot be empty or contain '/'")
        if not file.is_file():
            raise GarenError(f"{where}: datasets.{name}.runs.{label}: {file} is not a file (a TREC run file: "
                             "qid Q0 docid rank score tag)")
    allow_empty_docs = _bool(value.get("allow_empty_docs", False), f"{where}: datasets.{name}.allow_empty_docs")
    return DatasetEntry(str(name), str(value["spec"]), Path(value["index"]), allow_empty_docs, runs)


def _method(item, where: str) -> MethodEntry | str:
    if isinstance(item, str):
        return item if item == ALL else MethodEntry(item, item)
    value = _mapping(item, where)
    allowed = {"method", "label", "preset", "set", "budgets", "limit"}
    if "method" not in value or set(value) - allowed:
        raise GarenError(f"{where}: an entry is a method name, '{ALL}', or a mapping with 'method' and "
                         f"optionally {', '.join(sorted(allowed - {'method'}))}")
    label = str(value.get("label", value["method"]))
    if "/" in label or not label:
        raise GarenError(f"{where}: label '{label}' cannot be empty or contain '/' (it names a folder)")
    limit = value.get("limit")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise GarenError(f"{where}: limit must be an integer >= 1")
    return MethodEntry(
        method=str(value["method"]), label=label, preset=None if value.get("preset") is None else str(value["preset"]),
        overrides=_strings(value.get("set"), f"{where}.set"),
        budgets=None if "budgets" not in value else _budgets(value["budgets"], f"{where}.budgets"), limit=limit,
    )


def _budgets(value, where: str) -> tuple[int, ...]:
    items = _list(value, where) if value is not None else []
    if any(not isinstance(b, int) or isinstance(b, bool) or b < 1 for b in items) or len(set(items)) != len(items):
        raise GarenError(f"{where}: expected distinct integers >= 1, got {value}")
    return tuple(sorted(items))


def _strings(value, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, dict):
        raise GarenError(f"{where}: expected a list of KEY=VALUE strings, e.g. [methods.garen.tau_switch=2]")
    return tuple(str(v) for v in _list(value, where))


def _list(value, where: str) -> list:
    if isinstance(value, (str, dict)) or not isinstance(value, (list, tuple)):
        raise GarenError(f"{where}: expected a list")
    return list(value)


def _mapping(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise GarenError(f"{where}: expected a mapping")
    return value


def _bool(value, where: str) -> bool:
    if not isinstance(value, bool):
        raise GarenError(f"{where}: expected true or false, got {value!r}")
    return value


def _dataclass(cls, value, where: str):
    value = _mapping(value, where)
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(value) - names)
    if unknown:
        raise GarenError(f"{where}: unknown field(s) "
                         f"{', '.join(unknown)}{did_you_mean(unknown[0], sorted(names))}; known: "
                         f"{', '.join(sorted(names))}")
    try:
        return cls(**value)
    except TypeError as err:
        raise GarenError(f"{where}: {err}") from None
