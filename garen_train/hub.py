"""Sharing an export: its model card, and with ``--push-to-hub REPO`` an upload of the whole export folder to a
Hugging Face model repository through ``huggingface_hub`` (token: ``HF_TOKEN`` or ``huggingface-cli login``).

The card is written before the upload, so what reaches the hub is exactly the folder on disk: weights, tokenizer,
``manifest.json`` and ``README.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from garen_infer.errors import GarenError
from garen_infer.llm.exported_models import KIND
from garen_train.model_card import write_model_card


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--push-to-hub", metavar="REPO",
                        help="upload the export to this Hugging Face model repository (owner/name)")
    parser.add_argument("--private", action="store_true", help="with --push-to-hub: create the repository as private")


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse a malformed repository id before the export runs (an export can take minutes)."""
    repo = getattr(args, "push_to_hub", None)
    if repo is None:
        return
    if repo.count("/") != 1 or not all(part.strip() for part in repo.split("/")):
        raise GarenError(f"--push-to-hub: '{repo}' is not a repository id; write owner/name, e.g. "
                         "my-lab/garen-navigator")
    if getattr(args, "out", None) is None:  # a soft partition writes a groups stage into an index folder
        raise GarenError("--push-to-hub: this checkpoint exports into an index folder, not a model folder; "
                         "there is nothing to upload")


def share(manifest: dict, args: argparse.Namespace, api=None) -> dict:
    """After an export: write the model card of a model export, then push it when asked. Returns what was done,
    for the command's output. ``api``: an ``HfApi`` (made here when None)."""
    folder = getattr(args, "out", None)
    repo = getattr(args, "push_to_hub", None)
    if manifest.get("kind") != KIND or folder is None:  # e.g. a soft partition (check_arguments refused a push)
        return {}
    done: dict[str, object] = {"model_card": str(write_model_card(Path(folder), manifest, repo))}
    if repo:
        done["pushed"] = push(Path(folder), repo, private=args.private, api=api)
    return done


def push(folder: Path, repo: str, private: bool = False, api=None) -> dict:
    """Create the model repository if needed and upload the folder as one commit."""
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    from huggingface_hub.errors import HFValidationError

    try:
        url = api.create_repo(repo_id=repo, repo_type="model", private=private, exist_ok=True)
        commit = api.upload_folder(repo_id=repo, repo_type="model", folder_path=str(folder),
                                   commit_message=f"garen-train export of {folder.name}")
    except (OSError, HFValidationError) as err:  # HTTP refusals, no network, offline mode, a name the hub rejects
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise GarenError(f"--push-to-hub {repo}: the upload failed ({first}); the export itself is complete "
                         f"in {folder}: check the network and the token (HF_TOKEN or huggingface-cli login), "
                         "then push it again with the same command") from None
    return {"repo": repo, "url": str(url), "commit": str(getattr(commit, "oid", commit) or "")}
