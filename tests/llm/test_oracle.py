"""The oracle backend: a SIMULATED reranker and navigator from the relevance judgments plus seeded noise. Its
rule gives the stated pairwise accuracy, its noise depends only on (seed, role, query, documents), methods never
receive the judgments, and every output of a run made with it says it is a simulation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO

from garen_infer.data.dataset import Dataset, Document, Query
from garen_infer.doors.cli import main
from garen_infer.errors import GarenError
from garen_infer.llm.oracle import (
    RUN_TAG,
    NoisyJudge,
    OracleReranker,
    OracleSpec,
    expected_pairwise_accuracy,
    ordered_pairs,
    pairwise_accuracy,
    standard_normal,
)
from garen_infer.llm.roles import RerankJob, Roles, ScoreJob, build_roles
from garen_infer.methods.base import METHODS, get_method

ORACLE = {"reranker": {"backend": "oracle", "sigma": 0.3, "seed": 7},
          "navigator": {"backend": "oracle", "sigma": 0.3, "seed": 7}}


def judged_pool(grades: list[int], qid: str = "q") -> tuple[dict, list[str]]:
    """One query; document i has grade grades[i] (0 = unjudged)."""
    doc_ids = [f"d{i}" for i in range(len(grades))]
    return {qid: {d: g for d, g in zip(doc_ids, grades) if g}}, doc_ids


# ---- the rule and its quality --------------------------------------------------------------------------------
def test_ordered_pairs_counts_a_hand_worked_case():
    # gains 1 at scores 3 and 2, gains 0 at 1 and 2: (3>1) (3>2) (2>1) right, (2=2) a tie -> 3.5 of 4
    assert ordered_pairs([3.0, 1.0, 2.0, 2.0], [1, 0, 1, 0]) == (3.5, 4)
    assert ordered_pairs([1.0, 2.0], [1, 1]) == (0.0, 0)  # equal gains make no pair


@pytest.mark.parametrize("sigma", [0.25, 0.5, 1.0, 2.0])
def test_the_rule_gives_the_stated_pairwise_accuracy_for_binary_judgments(sigma):
    qrels, doc_ids = judged_pool([1] * 1500 + [0] * 1500)
    judge = NoisyJudge(qrels, doc_ids, OracleSpec(sigma=sigma, seed=3), "reranker")
    measured = pairwise_accuracy(judge, {"q": list(range(3000))})
    assert measured == pytest.approx(expected_pairwise_accuracy(sigma), abs=0.015)


def test_the_rule_gives_the_stated_pairwise_accuracy_for_graded_judgments():
    """Grades 0, 1, 3 (equal counts): a third of the pairs differ by 1, 2 and 3 grades each."""
    qrels, doc_ids = judged_pool([0] * 800 + [1] * 800 + [3] * 800)
    judge = NoisyJudge(qrels, doc_ids, OracleSpec(sigma=1.0), "reranker")
    stated = sum(expected_pairwise_accuracy(1.0, delta) for delta in (1, 2, 3)) / 3
    assert pairwise_accuracy(judge, {"q": list(range(2400))}) == pytest.approx(stated, abs=0.015)
    binary = NoisyJudge(qrels, doc_ids, OracleSpec(sigma=1.0, gain="binary"), "reranker")
    assert pairwise_accuracy(binary, {"q": list(range(2400))}) == pytest.approx(
        expected_pairwise_accuracy(1.0), abs=0.015
    )


# ---- correlated noise: documents close in embedding space share their errors ---------------------------------
def clustered_pool(queries: int = 200, clusters: int = 6, per_cluster: int = 10, dim: int = 24, seed: int = 0):
    """Documents in tight clusters of embedding space; each query judges half of every cluster relevant (grade 1),
    so its pairs mix near neighbours and strangers."""
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)) * 3
    vectors = np.repeat(centres, per_cluster, axis=0) + rng.standard_normal((clusters * per_cluster, dim))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    doc_ids = [f"d{i}" for i in range(len(vectors))]
    qrels = {
        f"q{k}": {d: 1 for d in rng.choice(doc_ids, size=len(doc_ids) // 2, replace=False)}
        for k in range(queries)
    }
    return qrels, doc_ids, vectors


def test_correlated_noise_has_the_stated_correlation():
    """corr(z_a, z_b) = rho * cos(u_a, u_b) over the centred directions, and z stays N(0, 1)."""
    import numpy as np

    from garen_infer.llm.oracle import centred_directions

    _, doc_ids, vectors = clustered_pool()
    judge = NoisyJudge({}, doc_ids, OracleSpec(sigma=1.0, correlation=0.6), "reranker", vectors)
    u = centred_directions(vectors)
    near, far = (0, 1), (0, 59)  # same cluster; another cluster
    draws = np.array([[judge.draw(f"q{k}", (r,)) for r in (0, 1, 59)] for k in range(4000)])
    assert draws.std(axis=0) == pytest.approx([1, 1, 1], abs=0.05)
    for (a, b), column in ((near, 1), (far, 2)):
        stated = 0.6 * float(u[a] @ u[b])
        assert np.corrcoef(draws[:, 0], draws[:, column])[0, 1] == pytest.approx(stated, abs=0.05)
    assert 0.6 * float(u[0] @ u[1]) > 0.4  # the built case has near neighbours that share most of their noise


@pytest.mark.parametrize("sigma,rho", [(0.5, 0.5), (1.0, 0.8)])
def test_correlated_noise_gives_its_stated_pairwise_accuracy(sigma, rho):
    """The measured pairwise accuracy over every query's pool lands within 0.02 of the stated one: the mean over
    the pairs of Phi(1 / (sigma sqrt(2 (1 - rho cos(u_a, u_b))))), above the uniform noise's Phi(1 / (sigma sqrt 2))."""
    import numpy as np

    from garen_infer.llm.oracle import centred_directions

    qrels, doc_ids, vectors = clustered_pool()
    judge = NoisyJudge(qrels, doc_ids, OracleSpec(sigma=sigma, seed=5, correlation=rho), "reranker", vectors)
    u = centred_directions(vectors)
    rows = list(range(len(doc_ids)))
    stated = []
    for judged in qrels.values():
        relevant = [r for r in rows if doc_ids[r] in judged]
        other = [r for r in rows if doc_ids[r] not in judged]
        c = rho * (u[relevant] @ u[other].T)
        stated.extend(expected_pairwise_accuracy(sigma, 1.0, x) for x in c.ravel())
    target = float(np.mean(stated))
    assert pairwise_accuracy(judge, {qid: rows for qid in qrels}) == pytest.approx(target, abs=0.02)


def test_correlated_noise_needs_the_index_embeddings(tiny_dataset, tiny_index):
    with pytest.raises(GarenError,
                       match="models.reranker.correlation: correlated noise follows the index's embeddings"):
        build_roles({"reranker": {"backend": "oracle", "correlation": 0.5}}, [], None, None, dataset=tiny_dataset)
    built = build_roles({"reranker": {"backend": "oracle", "correlation": 0.5}}, [], tiny_index, None,
                        dataset=tiny_dataset)
    assert built.reranker.name == "oracle(sigma=0.5,seed=0,gain=graded,correlation=0.5)"
    from garen_infer.llm.oracle import banner, simulation_label

    label = simulation_label({"reranker": {"backend": "oracle", "correlation": 0.5}})
    assert label["roles"]["reranker"][
        "correlation"
    ] == 0.5 and "reranker sigma=0.5 seed=0 gain=graded correlation=0.5" in banner(label)
    assert "correlation" not in simulation_label({"reranker": {"backend": "oracle"}})["roles"]["reranker"]  # as before
    with pytest.raises(GarenError, match="correlation"):
        build_roles({"reranker": {"backend": "oracle", "correlation": 1.5}}, [], tiny_index, None, dataset=tiny_dataset)


def test_the_stated_accuracies():
    assert expected_pairwise_accuracy(0.0) == 1.0
    assert expected_pairwise_accuracy(0.5) == pytest.approx(0.9214, abs=1e-4)
    assert expected_pairwise_accuracy(1.0) == pytest.approx(0.7602, abs=1e-4)
    assert expected_pairwise_accuracy(2.0) == pytest.approx(0.6382, abs=1e-4)


def test_a_noiseless_oracle_orders_by_grade_and_is_the_limit_of_small_noise(tiny_dataset):
    def rerank(sigma, window):
        reranker = build_roles({"reranker": {"backend": "oracle", "sigma": sigma}}, [], None, None,
                               dataset=tiny_dataset).reranker
        [(order, completion)] = reranker.rerank([RerankJob("ignored", window, "q1")])
        return [tiny_dataset.documents[r].id for r in order], completion.text

    row = tiny_dataset.doc_index
    window = tuple(row[d] for d in ("py1", "vol2", "pho1", "vol1", "vol4", "py4"))  # q1: vol1 2, vol4 1, vol2 1
    order, text = rerank(0, window)
    assert order[0] == "vol1" and set(order[1:3]) == {"vol2", "vol4"} and set(order[3:]) == {"py1", "pho1", "py4"}
    assert text == " > ".join(f"[{window.index(row[d]) + 1}]" for d in order)
    assert rerank(1e-9, window) == (order, text)  # equal grades fall in the order of their draws
    assert rerank(0, tuple(reversed(window)))[0] == order  # not in the window's order


def test_the_pointwise_oracle_reranker_orders_windows_as_the_listwise_one(tiny_dataset, tiny_index, tmp_path):
    """``mode: pointwise`` scores each document with the reranker's own draws, so past sigma 0 both modes agree."""
    from garen_infer.configuration.presets import load_preset, run_config_from
    from garen_infer.llm.pointwise import PointwiseReranker
    from garen_infer.running.session import execute

    def reranker(mode):
        spec = {"backend": "oracle", "sigma": 0.7, "seed": 3, "mode": mode}
        return build_roles({"reranker": spec}, [d.full_text for d in tiny_dataset.documents], None, None,
                           dataset=tiny_dataset).reranker

    pointwise, listwise = reranker("pointwise"), reranker("listwise")
    assert isinstance(pointwise, PointwiseReranker) and isinstance(listwise, OracleReranker)
    jobs = [
        RerankJob(q.text, window, q.id)
        for q in tiny_dataset.queries
        for window in (tuple(range(12)), (11, 2, 7, 5, 0))
    ]
    assert [order for order, _ in pointwise.rerank(jobs)] == [order for order, _ in listwise.rerank(jobs)]

    config = run_config_from(load_preset("cpu-default"), "slidegar", 8)
    config.models = {"reranker": {"backend": "oracle", "sigma": 0.7, "seed": 3, "mode": "pointwise"}}
    metrics = execute(tiny_dataset, tiny_index, config, tmp_path / "run", log=lambda *_: None)
    assert metrics["simulation"]["roles"] == {"reranker": {"sigma": 0.7, "seed": 3, "gain": "graded",
                                                           "mode": "pointwise"}}
    config.models = {}  # the role passed in, not named by the config, labels the run the same way
    passed_in = execute(tiny_dataset, tiny_index, config, tmp_path / "passed",
                        roles=Roles(reranker=pointwise), log=lambda *_: None)
    assert passed_in["simulation"] == metrics["simulation"]


def test_a_group_scores_its_best_gain():
    qrels, doc_ids = judged_pool([0, 2, 1, 0])
    scorer = build_roles(
        {"navigator": {"backend": "oracle", "sigma": 0}},
        [],
        None,
        None,
        dataset=Dataset("hand", [Document(d, "") for d in doc_ids], [Query("q", "")], qrels),
    ).scorer("navigator")
    best_two, best_one, none = scorer.score([ScoreJob("", "", "q", (0, 1, 2)), ScoreJob("", "", "q", (2, 3)),
                                             ScoreJob("", "", "q", (0, 3))])
    assert best_two.score > best_one.score > none.score
    assert best_one.score == pytest.approx(1 / (1 + 2.718281828459045 ** -2))  # logistic(4 (1 - 1/2))


# ---- determinism: the noise of a pair depends on (seed, role, query, documents) only -------------------------
def test_the_same_seed_gives_the_same_scores_whatever_the_batch(tiny_dataset):
    def reranker(seed):
        return build_roles({"reranker": {"backend": "oracle", "sigma": 1.0, "seed": seed}}, [], None, None,
                           dataset=tiny_dataset).reranker

    windows = [tuple(range(12)), tuple(range(11, -1, -1)), (3, 5, 7, 9)]
    alone = [reranker(1).rerank([RerankJob("", w, qid)])[0][0] for w in windows for qid in ("q1", "q2")]
    batched = reranker(1).rerank([RerankJob("", w, qid) for w in windows for qid in ("q1", "q2")])
    assert [order for order, _ in batched] == alone
    first, backwards = alone[0], alone[2]  # q1 over the same twelve documents, given in reverse order
    assert first == backwards
    other_seed = [
        order
        for order, _ in reranker(2).rerank([RerankJob("", w, qid) for w in windows for qid in ("q1", "q2")])
    ]
    assert other_seed != alone

    judge = reranker(1).judge
    assert judge.score("q1", (0,)) == reranker(1).judge.score("q1", (0,))
    # roles err independently
    assert standard_normal(1, "reranker", "q1", ["vol1"]) != standard_normal(1, "navigator", "q1", ["vol1"])


def test_a_group_is_the_same_item_whatever_its_member_order(tiny_dataset):
    scorer = build_roles(ORACLE, [], None, None, dataset=tiny_dataset).scorer("navigator")
    a, b = scorer.score([ScoreJob("", "", "q1", (0, 4, 8)), ScoreJob("", "", "q1", (8, 0, 4))])
    assert a.score == b.score


def test_batching_across_queries_does_not_change_an_oracle_run(tiny_dataset, full_index, tmp_path):
    runs = [run(tiny_dataset, full_index, "garen", tmp_path / f"active-{n}", max_active_queries=n) for n in (1, 16)]
    assert (runs[0] / "run.trec").read_bytes() == (runs[1] / "run.trec").read_bytes()


# ---- the judgments reach the oracle only -----------------------------------------------------------------------
def run(dataset, index, method, out, **run_options):
    from garen_infer.configuration.presets import load_preset, run_config_from
    from garen_infer.llm.cache import NoCache
    from garen_infer.running.session import execute

    preset = load_preset("cpu-default")
    preset["models"] = ORACLE
    preset["run"] = {**preset.get("run", {}), **run_options}
    execute(dataset, index, run_config_from(preset, method, 8), out, cache=NoCache(), log=lambda *_: None)
    return out


@pytest.mark.parametrize("name", list(METHODS))
def test_methods_receive_no_judgments(name, tiny_dataset, full_index, tmp_path, monkeypatch):
    """Every registered method, run with the oracle: what it is built with and what its search is handed holds no
    relevance judgment (it would, were the runner to pass it the dataset as loaded)."""
    from garen_infer.configuration.run_config import RunConfig

    method_cls = get_method(name)
    if not set(method_cls.roles) <= set(ORACLE):
        pytest.skip(f"{name} needs a role the oracle cannot play")
    handed = []

    class Spy(method_cls):
        def __init__(self, config, index, dataset):
            handed.append(dataset)
            super().__init__(config, index, dataset)

        def search(self, state):
            handed.append(state)
            return (yield from super().search(state))

    monkeypatch.setattr(RunConfig, "method_class", property(lambda _: Spy))
    run(tiny_dataset, full_index, name, tmp_path / "run")
    assert tiny_dataset.qrels and len(handed) == 1 + 4
    datasets = [h for h in handed if isinstance(h, Dataset)]
    assert datasets and all(d.qrels == {} for d in datasets)
    assert all(not hasattr(state, "qrels") and "qrels" not in vars(state.query) for state in handed[1:])


@pytest.mark.parametrize("name", ["lattice", "lattice++"])
def test_lattice_slates_are_judged_by_the_documents_beneath_each_node(name, tiny_dataset, full_index, tmp_path):
    """cpu-default scores LATTICE's slates with the navigator role; the oracle judges a node by the documents beneath
    it (a request without them would be refused). At budget 8 only the first 8 documents of the tiny tree are ever
    shown, which holds the golds of q1 and q2: the oracle puts their grade-2 document first."""
    out = run(tiny_dataset, full_index, name, tmp_path / "run")
    top = {}
    for line in (out / "run.trec").read_text().splitlines():
        qid, _, doc, rank, *_ = line.split()
        if rank == "1":
            top[qid] = doc
    assert top["q1"] == "vol1" and top["q2"] == "pho1"


def test_the_oracle_refuses_a_dataset_without_judgments(tiny_dataset):
    bare = Dataset("bare", tiny_dataset.documents, tiny_dataset.queries)
    with pytest.raises(GarenError,
                       match="models.reranker: the oracle backend simulates a model from relevance "
                       "judgments, and dataset 'bare' has none"):
        build_roles({"reranker": {"backend": "oracle"}}, [], None, None, dataset=bare)
    with pytest.raises(GarenError, match="has none"):
        build_roles({"navigator": {"backend": "oracle"}}, [], None, None)


@pytest.mark.parametrize("spec, message", [
    ({"backend": "oracle", "temperature": 1},
     "models.reranker.temperature: no such option; models.reranker has backend, mode, sigma, seed, gain"),
    ({"backend": "oracle", "sigma": -1}, "models.reranker.sigma=-1.0: expected a number >= 0"),
    ({"backend": "oracle", "gain": "exp"}, "models.reranker.gain='exp': expected one of 'graded', 'binary'"),
    ({"backend": "oracle", "mode": "pairwise"}, "mode 'pairwise' is not one of listwise, pointwise"),
])
def test_bad_oracle_options_are_named(spec, message, tiny_dataset):
    with pytest.raises(GarenError, match=message):
        build_roles({"reranker": spec}, [], None, None, dataset=tiny_dataset)


def test_the_oracle_writes_no_text_but_the_simulated_planner(tiny_dataset):
    """An agent cannot be simulated; a generator can only as REPAIR's planner (llm/simulated_planner.py)."""
    from garen_infer.llm.simulated_planner import SimulatedPlanner

    with pytest.raises(GarenError, match="models.agent cannot be 'oracle'"):
        build_roles({"agent": {"backend": "oracle"}}, [], None, None, dataset=tiny_dataset)
    assert isinstance(
        build_roles({"generator": {"backend": "oracle"}}, [], None, None, dataset=tiny_dataset).generator,
        SimulatedPlanner,
    )


def test_the_oracle_scorer_needs_to_know_what_a_text_stands_for(tiny_dataset):
    scorer = build_roles(ORACLE, [], None, None, dataset=tiny_dataset).scorer("navigator")
    with pytest.raises(GarenError, match="needs the corpus rows each text stands for"):
        scorer.score([ScoreJob("query", "a summary", "q1")])
    with pytest.raises(GarenError, match="needs each request's query id"):
        scorer.score([ScoreJob("query", "a summary", "", (1,))])


def test_the_cli_refuses_the_oracle_on_a_dataset_without_judgments(tmp_path, capsys):
    from conftest import DOCS, QUERIES, write_jsonl

    corpus = write_jsonl(tmp_path / "corpus.jsonl", [{"_id": d, "title": t, "text": x} for d, t, x in DOCS])
    queries = write_jsonl(tmp_path / "queries.jsonl", [{"_id": q, "text": x} for q, x, _ in QUERIES])
    spec = f"jsonl:{corpus},{queries}"
    assert main(["index", "--dataset", spec, "--out", str(tmp_path / "idx"), "--set",
                 "index={bm25: {variant: bm25s}}"]) == 0
    capsys.readouterr()
    code = main(["run", "--dataset", spec, "--index", str(tmp_path / "idx"), "--method", "rerank", "--out",
                 str(tmp_path / "run"),
                 "--set", "models.reranker={backend: oracle}", "--no-cache"])
    err = capsys.readouterr().err
    # the SIMULATED banner is on stderr too
    errors = [line for line in err.splitlines() if line.startswith("garen-infer run: error: ")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert (
        "the oracle backend simulates a model from relevance judgments, and dataset" in errors[0]
        and "has none" in errors[0]
    )


# ---- labelling: every output of a simulated run says so -------------------------------------------------------
def test_every_output_of_a_simulated_run_says_so(tiny_dataset, full_index, beir_dir, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "--dataset", f"beir:{beir_dir}", "--index", str(full_index.path), "--method", "garen",
                 "--budget", "8",
                 "--out", str(out), "--no-cache", "--set", "models.reranker={backend: oracle, sigma: 0.2}",
                 "--set", "models.navigator={backend: oracle, sigma: 0.4, seed: 1}"])
    assert code == 0
    printed = capsys.readouterr()
    # the CLI: stdout is the metrics, labelled first; a banner on stderr before the queries run and after the numbers
    assert next(iter(json.loads(printed.out))) == "simulation"
    assert printed.err.count("SIMULATED RUN (navigator sigma=0.4 seed=1 gain=graded, reranker sigma=0.2 "
                             "seed=0 gain=graded)") == 2
    config, metrics = (json.loads((out / name).read_text()) for name in ("config.json", "metrics.json"))
    for saved in (config, metrics):
        assert "NOT results of any model" in saved["simulation"]["notice"]
        assert saved["simulation"]["roles"] == {"reranker": {"sigma": 0.2, "seed": 0, "gain": "graded"},
                                                "navigator": {"sigma": 0.4, "seed": 1, "gain": "graded"}}
    assert all(line.split()[5] == f"garen.{RUN_TAG}" for line in (out / "run.trec").read_text().splitlines())

    # eval of the run file and the report over metrics.json
    assert main(["eval", "--dataset", str(beir_dir), "--run", str(out / "run.trec")]) == 0
    assert "NOT results of any model" in json.loads(capsys.readouterr().out)["simulation"]
    report = subprocess.run([sys.executable, str(REPO / "benchmarks" / "report.py"), str(out / "metrics.json")],
                            capture_output=True, text=True, check=True).stdout
    assert "run [SIMULATED]" in report and "[SIMULATED] rows: SIMULATION" in report


def test_roles_passed_in_label_the_run_even_when_the_config_does_not_name_them(tiny_dataset, tiny_index, tmp_path):
    from garen_infer.configuration.presets import load_preset, run_config_from
    from garen_infer.running.session import execute

    roles = build_roles({"reranker": ORACLE["reranker"]}, [], None, None, dataset=tiny_dataset)
    config = run_config_from(load_preset("cpu-default"), "rerank", 8)  # says models.reranker: embedding
    metrics = execute(tiny_dataset, tiny_index, config, tmp_path / "run", roles=roles, log=lambda *_: None)
    assert metrics["simulation"]["roles"] == {"reranker": {"sigma": 0.3, "seed": 7, "gain": "graded"}}


def load_sweep():
    import importlib.util

    spec = importlib.util.spec_from_file_location("oracle_sweep", REPO / "benchmarks" / "oracle_sweep.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sweep_prints_and_writes_a_labelled_table(beir_dir, tiny_index, tmp_path, capsys):
    out = tmp_path / "sweep"
    code = load_sweep().main(["--dataset", f"beir:{beir_dir}", "--index", str(tiny_index.path), "--out", str(out),
                              "--methods", "bm25", "rerank", "slidegar", "--sigmas", "0", "1", "--budget", "8",
                              "--compare", "slidegar", "--against", "rerank", "bm25"])
    assert code == 0
    printed = capsys.readouterr().out
    assert printed.count("SIMULATED RUN") == 2 and "| sigma | acc (1 grade) | acc measured |" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert "NOT results of any model" in summary["simulation"]["notice"]
    noiseless, noisy = summary["rows"]
    assert noiseless["measured_pairwise_accuracy"] == 1.0 and noisy["measured_pairwise_accuracy"] < 1.0
    assert set(noiseless["runs"]) == {"bm25", "rerank", "slidegar"}
    assert noiseless["runs"]["bm25"] == noisy["runs"]["bm25"]  # no reranker: the same run in every row
    assert noiseless["runs"]["rerank"]["nDCG@10"] >= noisy["runs"]["rerank"]["nDCG@10"]
    for column in ("rerank", "slidegar"):
        assert "simulation" in json.loads((out / column / "sigma-1" / "metrics.json").read_text())
    assert "simulation" not in json.loads((out / "bm25" / "no-reranker" / "metrics.json").read_text())
    assert "SIMULATED reranker" in (out / "summary.md").read_text()
    # paired differences over the same queries: their mean is the difference of the means
    for row in summary["rows"]:
        assert set(row["versus"]) == {"slidegar - rerank", "slidegar - bm25"}
        for measure in ("nDCG@10", "R@100"):
            mean, half_width = row["versus"]["slidegar - bm25"][measure]
            assert (
                mean
                == pytest.approx(row["runs"]["slidegar"][measure] - row["runs"]["bm25"][measure], abs=2e-4)
                and half_width >= 0
            )
    assert "| sigma | slidegar - rerank (nDCG@10 / R@100) | slidegar - bm25 (nDCG@10 / R@100) |" in printed


def test_the_sweep_takes_the_navigator_from_a_preset_or_simulates_it(beir_dir, full_index, tiny_model_dir,
                                                                     tmp_path, capsys):
    """GAREN's navigator: a real model named by a preset (here a tiny transformers model) next to the oracle."""
    import yaml

    preset = tmp_path / "trained-navigator.yaml"
    preset.write_text(yaml.safe_dump({"models": {"navigator": {"backend": "transformers",
                                                               "model": str(tiny_model_dir), "device": "cpu"}}}))
    out = tmp_path / "sweep"
    code = load_sweep().main(["--dataset", f"beir:{beir_dir}", "--index", str(full_index.path), "--out",
                              str(out), "--methods", "garen",
                              "--sigmas", "0.5", "--budget", "12", "--navigators", str(preset), "oracle",
                              "--navigator-sigma", "0",
                              "--cache", str(tmp_path / "responses.sqlite")])
    assert code == 0, capsys.readouterr().err
    runs = json.loads((out / "summary.json").read_text())["rows"][0]["runs"]
    assert set(runs) == {"garen[nav=trained-navigator]", "garen[nav=oracle]"}
    real = json.loads((out / "garen.nav-trained-navigator" / "sigma-0.5" / "config.json").read_text())
    assert real["models"]["navigator"]["backend"] == "transformers" and set(real["simulation"]["roles"]) == {"reranker"}
    simulated = json.loads((out / "garen.nav-oracle" / "sigma-0.5" / "config.json").read_text())
    assert simulated["simulation"]["roles"]["navigator"]["sigma"] == 0


def test_the_crossover_reads_where_garens_lead_holds():
    """benchmarks/oracle_crossover.py: the accuracy ranges where the lead is >= the margin, interpolated between
    swept points, including a lead that holds only at low accuracy (as against LATTICE)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("oracle_crossover", REPO / "benchmarks" / "oracle_crossover.py")
    crossover = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(crossover)
    rising = [(0.70, 0.00, 0.01), (0.80, 0.04, 0.01), (0.90, 0.10, 0.01)]
    assert crossover.winning_ranges(rising, 0.02) == "0.750-0.900"
    falling = [(0.70, 0.10, 0.01), (0.90, -0.02, 0.01), (0.99, -0.01, 0.01)]
    assert crossover.winning_ranges(falling, 0.02) == "0.700-0.833"
    assert crossover.winning_ranges([(0.8, 0.0, 0.0), (0.9, 0.01, 0.0)], 0.02) == "never"
    summary = {"rows": [{"measured_pairwise_accuracy": 0.9,
                         "versus": {"garen[nav=oracle] - rerank": {"nDCG@10": [0.05, 0.01]}}},
                        {"measured_pairwise_accuracy": 0.8,
                         "versus": {"garen[nav=oracle] - rerank": {"nDCG@10": [0.01, 0.01]}}}]}
    assert crossover.leads(summary) == {"rerank": [(0.8, 0.01, 0.01), (0.9, 0.05, 0.01)]}
