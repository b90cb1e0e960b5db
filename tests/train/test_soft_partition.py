"""The soft-partition job (garen_train.partition): DMoN's objective in sparse mini-batch form, recovery of planted
groups through ``garen-train fit`` with the shipped config, and ``garen-train export`` into a groups stage that
garen-infer reads (threshold and cap honoured; a disjoint export reproduces the Leiden run exactly)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from garen_infer.index.knn_graph import KnnGraph
from garen_train.checkpoint_file import read_checkpoint
from garen_train.cli import main as garen_train
from garen_train.partition.objective import dmon_loss, overlap, per_group

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "train" / "partition-dmon.yaml"


def fit(index: Path, out: Path, *overrides: str) -> Path:
    """``garen-train fit`` with the shipped config on ``index``; returns the last checkpoint."""
    garen_train(["fit", "--config", str(CONFIG), f"--data.init_args.index={index}", f"--trainer.default_root_dir={out}",
                 f"--trainer.callbacks.init_args.dirpath={out}", "--trainer.enable_progress_bar=false",
                 "--trainer.enable_model_summary=false", *overrides])
    return out / "last.ckpt"


def history(checkpoint: Path) -> list[dict]:
    return read_checkpoint(checkpoint)["partition"]["history"]


# ---- the objective ------------------------------------------------------------------------------------------------
def test_sparse_objective_is_torch_geometrics_dmon_on_a_whole_graph():
    from torch_geometric.nn import DMoNPooling

    gen = torch.Generator().manual_seed(0)
    n, c = 30, 4
    adjacency = (torch.rand(n, n, generator=gen) < 0.2) * torch.rand(n, n, generator=gen)
    adjacency = torch.maximum(adjacency, adjacency.T).fill_diagonal_(0)
    logits = torch.randn(n, c, generator=gen)
    pool = DMoNPooling(c, c)  # its MLP made the identity: DMoN's assignment is then softmax(logits)
    torch.nn.init.eye_(pool.mlp.lins[0].weight)
    torch.nn.init.zeros_(pool.mlp.lins[0].bias)
    _, _, _, spectral, _, cluster = pool(logits, adjacency)

    s, ids = logits.softmax(dim=-1), torch.arange(c).repeat(n, 1)
    src, dst = adjacency.nonzero(as_tuple=True)
    degree = adjacency.sum(dim=1)
    edge_term = (adjacency[src, dst] * overlap(ids[src], s[src], ids[dst], s[dst])).sum()
    ours = dmon_loss(edge_term, per_group(ids, s, degree, c), per_group(ids, s, None, c), float(degree.sum()), n, 1.0)
    assert -ours["modularity"].item() == pytest.approx(spectral.item(), abs=1e-6)
    assert ours["collapse"].item() == pytest.approx(cluster.item(), abs=1e-6)


def test_overlap_matches_ids_across_differently_padded_rows():
    ids_a = torch.tensor([[-1, 2, 5], [1, 3, 4]])
    ids_b = torch.tensor([[-1, -1, 5], [0, 3, 4]])
    a = torch.tensor([[0.0, 0.6, 0.4], [0.2, 0.3, 0.5]])
    b = torch.tensor([[0.0, 0.0, 1.0], [0.1, 0.7, 0.2]])
    assert overlap(ids_a, a, ids_b, b).tolist() == pytest.approx([0.4 * 1.0, 0.3 * 0.7 + 0.5 * 0.2])


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """A stochastic block model (6 blocks of 40, 6 of each row's 8 neighbours in its block) with random document
    vectors: only the graph carries the groups."""
    from garen_train.partition.synthetic import planted_graph, write_index

    rows, labels = planted_graph(n_blocks=6, size=40, k=8, k_in=6, seed=1)
    vectors = np.random.default_rng(0).normal(size=(len(rows), 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    graph = KnnGraph(rows, np.ones(rows.shape, dtype=np.float16))
    return write_index(tmp_path_factory.mktemp("planted") / "index", vectors, graph), labels


def test_the_mini_batch_loss_has_the_full_objectives_gradient(planted):
    from garen_train.partition.data import node_batch
    from garen_train.partition.graph import PartitionGraph
    from garen_train.partition.model import SoftPartition

    index, _ = planted
    graph = PartitionGraph.load(index, hops=2)
    model = SoftPartition(hidden=16, dim=8, dropout=0.0)
    model._build(2, 16, graph.n, 6)
    model.init_group.copy_(torch.arange(graph.n) % 6)
    model.attach(graph)
    model._initialise()
    model.evaluate()
    model.log = lambda *args, **kwargs: None
    nodes = torch.arange(0, 80)  # two of the six blocks, and some of their neighbours outside the batch

    def full_loss(s_all):
        ids = model.candidates
        edge_term = (graph.weight * overlap(ids[graph.src], s_all[graph.src], ids[graph.dst], s_all[graph.dst])).sum()
        volume, size = per_group(ids, s_all, graph.degree, 6), per_group(ids, s_all, None, 6)
        return dmon_loss(edge_term, volume, size, float(graph.degree.sum()), graph.n, 1.0)["loss"]

    batch = node_batch(graph, nodes)
    full_loss(torch.cat([model.assign(nodes, batch.features), model.assignment[80:]])).backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.training_step(batch, 0).backward()
    for want, got in zip(expected, (p.grad for p in model.parameters())):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-4)  # float32 sums in another order


def test_training_lowers_the_objective_and_recovers_planted_groups(planted, tmp_path):
    """From random labels: the exact objective falls from +0.05 to -0.566 (the planted blocks' modularity) in 60
    epochs, and the argmax groups are the planted blocks: adjusted Rand index 1.0 when this test was written
    (asserted >= 0.95)."""
    from garen_train.partition.quality import adjusted_rand_index

    index, labels = planted
    checkpoint = fit(index, tmp_path, "--trainer.max_epochs=60", "--data.init_args.init=random",
                     "--data.init_args.n_groups=6",
                     "--data.init_args.batch_nodes=64", "--model.init_args.hidden=32", "--model.init_args.dim=16",
                     "--model.init_args.dropout=0.0", "--model.init_args.anchor=0")
    losses = [h["loss"] for h in history(checkpoint)]
    assert losses[-1] < losses[0] - 0.4  # from about 0 (random labels) to about -0.56 (the planted modularity)
    assert sum(b < a for a, b in zip(losses, losses[1:])) >= 0.7 * (len(losses) - 1)  # mostly downhill
    state = read_checkpoint(checkpoint)["state_dict"]
    found = state["candidates"].gather(1, state["assignment"].argmax(dim=1, keepdim=True)).squeeze(1)
    assert adjusted_rand_index(found.numpy(), labels) >= 0.95


# ---- export ---------------------------------------------------------------------------------------------------------
def test_memberships_become_groups_by_threshold_and_cap():
    from garen_train.partition.export import memberships_to_groups

    ids = torch.tensor([[-1, 0, 1], [0, 1, 2], [0, 1, 2], [-1, -1, 2]])
    values = torch.tensor([[0.0, 0.7, 0.3], [0.1, 0.5, 0.4], [0.34, 0.33, 0.33], [0.0, 0.0, 1.0]])
    # threshold 0.3, cap 2: row 0 -> 0 (0.7), 1 (0.3); row 1 -> 1, 2 (0.1 < 0.3); row 2 -> 0, then 1 or 2
    # (tie: the stable sort keeps the lower slot, group 1); row 3 -> 2
    groups, weights = memberships_to_groups(ids, values, threshold=0.3, cap=2)
    assert groups == [[0, 2], [0, 1, 2], [1, 3]]
    assert weights[0] == pytest.approx([0.7, 0.34]) and weights[1] == pytest.approx([0.3, 0.5, 0.33])
    # cap 1 is a partition by the best group, whatever the threshold
    assert memberships_to_groups(ids, values, threshold=0.0, cap=1)[0] == [[0, 2], [1], [3]]
    # a high threshold keeps only the best group: no document is left without one
    assert memberships_to_groups(ids, values, threshold=0.9, cap=3)[0] == [[0, 2], [1], [3]]


@pytest.fixture(scope="module")
def leiden_index(tiny_dataset, tiny_index, tmp_path_factory) -> Path:
    """The tiny corpus's index with a Leiden groups stage (groups of at most 4), copied so exports can write."""
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig

    folder = tmp_path_factory.mktemp("soft") / "index"
    shutil.copytree(tiny_index.path, folder)
    IndexFolder.build(tiny_dataset, folder, IndexConfig.from_dict({"groups": {"max_group_size": 4}}),
                      log=lambda *_: None)
    return folder


def export(checkpoint: Path, index: Path, beir_dir: Path, *options: str) -> None:
    assert garen_train(["export", "--checkpoint", str(checkpoint), "--index", str(index), "--dataset",
                        f"beir:{beir_dir}", *options]) == 0


def test_a_fresh_export_process_imports_the_checkpoints_own_job_class_only(tmp_path, monkeypatch):
    """Lightning (2.6.6 on) restores only LightningModule classes already imported, and a fresh ``garen-train
    export`` process has imported none: export imports the checkpoint's class when it is a garen_train job, and
    leaves any other class path to Lightning's refusal."""
    from types import SimpleNamespace

    from garen_train import export as export_cli

    imported: list[str] = []
    monkeypatch.setattr(export_cli, "importlib", SimpleNamespace(import_module=imported.append))
    for class_path in ("garen_train.partition.model.SoftPartition", "os.system", ""):
        path = tmp_path / "job.ckpt"
        torch.save({"hyper_parameters": {"_class_path": class_path}}, path)
        export_cli.import_job_class(path)
    torch.save({"state_dict": {}}, tmp_path / "bare.ckpt")  # no hyper-parameters at all
    export_cli.import_job_class(tmp_path / "bare.ckpt")
    assert imported == ["garen_train.partition.model"]


def test_export_writes_an_overlapping_groups_stage(leiden_index, beir_dir, tiny_dataset, tmp_path, monkeypatch):
    from garen_infer.index.folder import IndexFolder

    monkeypatch.setenv("GAREN_CACHE_DIR", str(tmp_path / "cache"))
    index = tmp_path / "index"
    shutil.copytree(leiden_index, index)
    checkpoint = fit(index, tmp_path / "fit", "--trainer.max_epochs=3", "--data.init_args.batch_nodes=4",
                     "--model.init_args.temperature=1.0")
    export(checkpoint, index, beir_dir, "--threshold", "0.1", "--max-groups-per-doc", "2")

    folder = IndexFolder.open(index, tiny_dataset)
    entry = folder.manifest["stages"]["groups_soft"]
    assert entry["params"]["threshold"] == 0.1 and entry["params"]["max_groups_per_doc"] == 2
    assert (
        entry["params"]["checkpoint"] == str(checkpoint.resolve())
        and len(entry["params"]["checkpoint_sha256"]) == 64
    )
    groups = folder.groups("groups_soft")
    weights = np.load(index / "groups_soft" / "doc_membership_weights.npy")
    assert entry["info"]["overlap_rate"] == pytest.approx(
        float(np.mean([len(g) > 1 for g in groups.doc_groups])), abs=1e-4
    )
    assert entry["info"]["overlap_rate"] > 0  # temperature 1: soft memberships, so some documents join two groups
    for row, gs in enumerate(groups.doc_groups):
        assert 1 <= len(gs) <= 2 and gs[0] == groups.doc_group[row]
        assert all(weights[row, i] >= 0.1 for i in range(1, len(gs)))  # further groups reach the threshold
        assert all(row in groups.members[g] for g in gs)
    assert all(groups.texts)  # every group summarised (extractive, as the index's groups stage)

    # rebuilding the Leiden groups makes every stage learned from them stale, whatever name it was exported under
    from garen_infer.index.stages import IndexConfig

    export(checkpoint, index, beir_dir, "--stage", "groups_other")
    IndexFolder.build(tiny_dataset, index, IndexConfig.from_dict({"groups": {"max_group_size": 3}}),
                      log=lambda *_: None)
    stages = IndexFolder.open(index, tiny_dataset).manifest["stages"]
    assert "groups" in stages and "groups_soft" not in stages and "groups_other" not in stages


def test_a_disjoint_export_reproduces_the_leiden_run_exactly(leiden_index, beir_dir, tiny_dataset, tmp_path,
                                                             monkeypatch):
    """An anchor far above any cosine logit keeps every document in its Leiden group; with one group per document
    the exported stage is the Leiden stage, and GAREN's run on it is the Leiden run, byte for byte."""
    from garen_infer.index.folder import IndexFolder
    from garen_infer.running.runner import RunConfig
    from garen_infer.running.session import execute

    monkeypatch.setenv("GAREN_CACHE_DIR", str(tmp_path / "cache"))
    index = tmp_path / "index"
    shutil.copytree(leiden_index, index)
    checkpoint = fit(index, tmp_path / "fit", "--trainer.max_epochs=2", "--data.init_args.batch_nodes=4",
                     "--model.init_args.anchor=100")
    export(checkpoint, index, beir_dir, "--max-groups-per-doc", "1")
    for name in ("doc_groups.npy", "groups.jsonl", "stats.json"):
        assert (index / "groups_soft" / name).read_bytes() == (index / "groups" / name).read_bytes()
    assert not (index / "groups_soft" / "doc_memberships.npy").exists()  # disjoint: no membership files

    folder = IndexFolder.open(index, tiny_dataset)
    models = {"reranker": {"backend": "embedding"}, "navigator": {"backend": "embedding"}}
    for stage in ("groups", "groups_soft"):
        options = {"budget": 8, "window": 4, "keep": 2, "groups": stage}
        config = RunConfig.build("garen", options, models=models)
        execute(tiny_dataset, folder, config, tmp_path / stage, log=lambda *_: None)
    assert (tmp_path / "groups_soft" / "run.trec").read_bytes() == (tmp_path / "groups" / "run.trec").read_bytes()
    traces = [
        [json.loads(line)["trace"] for line in (tmp_path / s / "trace.jsonl").read_text().splitlines()]
        for s in ("groups", "groups_soft")
    ]
    assert traces[0] == traces[1]


def test_partition_report_gives_quality_and_c3_counts_from_a_run(leiden_index, tiny_dataset, tmp_path,
                                                                 monkeypatch, capsys):
    from garen_infer.index.folder import IndexFolder
    from garen_infer.running.runner import RunConfig
    from garen_infer.running.session import execute

    monkeypatch.setenv("GAREN_CACHE_DIR", str(tmp_path / "cache"))
    models = {"reranker": {"backend": "embedding"}, "navigator": {"backend": "embedding"}}
    run = tmp_path / "run"
    options = {"budget": 8, "window": 2, "keep": 1}  # a window of 2 leaves gold documents outside it
    config = RunConfig.build("garen", options, models=models)
    execute(tiny_dataset, IndexFolder.open(leiden_index, tiny_dataset), config, run, log=lambda *_: None)
    capsys.readouterr()
    assert garen_train(["partition-report", "--index", str(leiden_index), "--stage", "groups", "--run",
                        f"groups={run}", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    gold = [json.loads(line)["trace"]["gold"] for line in (run / "trace.jsonl").read_text().splitlines()]
    pairs = sum(g["pairs_outside_window"] for g in gold)
    assert pairs > 0 and row["gold_pairs_outside_window"] == pairs
    assert row["gold_group_never_scored"] == pairs - sum(g["gold_group_scored"] for g in gold)
    assert row["gold_group_never_selected"] == pairs - sum(g["gold_group_selected"] for g in gold)
    assert row["ari_vs_groups"] == 1.0 and row["overlap_rate"] == 0 and row["size_max"] <= 4
    assert row["nDCG@10"] == json.loads((run / "metrics.json").read_text())["nDCG@10"]
    # a run made on other groups is refused rather than misreported
    config = json.loads((run / "config.json").read_text())
    config["method_options"]["groups"] = "groups_kmeans"
    (run / "config.json").write_text(json.dumps(config))
    assert garen_train(["partition-report", "--index", str(leiden_index), "--stage", "groups", "--run",
                        f"groups={run}"]) == 2
    assert "not GAREN on 'groups'" in capsys.readouterr().err


def test_the_report_table_shows_measures_to_four_decimals():
    from garen_train.partition.report import markdown

    table = markdown([{"stage": "groups", "nDCG@10": 0.6495634709199392, "size_median": 10.0, "groups": 492},
                      {"stage": "groups_soft", "nDCG@10": None}])
    assert table.splitlines()[2:] == ["| groups | 0.6496 | 10.0 | 492 |", "| groups_soft |  |  |  |"]


def test_top10_sources_splits_a_runs_top_ten_by_the_first_stage_depth():
    import importlib.util

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("top10_sources", REPO / "benchmarks" / "top10_sources.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    first_stage = {"q": ["a", "b", "c"]}
    run = {"q": ["x", "a", "y", "b"] + [f"z{i}" for i in range(8)]}  # 12 documents, 10 in the top
    counts = script.top10_sources(run, first_stage, {"q": {"a": 1, "y": 2, "z7": 1, "c": 0}}, depth=2)
    # top 10: a, b inside the first stage's top 2 (a relevant); x, y, z0..z5 beyond (y relevant); relevant z7
    # is found but ranked 12th
    assert counts == {"queries": 1, "inside": 2, "inside_relevant": 1, "beyond": 8, "beyond_relevant": 1,
                      "found_beyond": 10, "found_beyond_relevant": 2}
