"""What each option of a config means, where it comes from, what it allows and its default: ``garen-infer
options METHOD`` prints it for a method (or for the preset's ``run`` and ``first_stage`` sections).

A field is documented where it is declared, by the comment beside it (continued on lines that start ``#   ``)
or the comment lines just above it, so the declaration stays the one place a default and its reason live; a
field's ``metadata["doc"]`` overrides the comment. The paper source is the comment's parenthesised reference
(``sec. 5``, ``App. B.1.2; reference num_iters``, ``Table 3 ablations``).
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import re
import tokenize
from dataclasses import dataclass

from garen_infer.errors import GarenError

SOURCE_WORDS = re.compile(r"\b(sec\.|App\.|Table|Fig\.|Eq\.|reference|released|BRIGHT|paper|code)")
SECTION = re.compile(r"\b(?:sec\.|App\.|Table|Fig\.|Eq\.) ?[A-Z]?[\d.]*\d")  # sec. 5, App. B.1.2, Table 3


@dataclass(frozen=True)
class OptionDoc:
    name: str
    allowed: str  # what the checker accepts, in words (settings.describe)
    default: object
    source: str  # the paper section or reference code it follows, '' when the comment names none
    meaning: str


def option_docs(cls) -> list[OptionDoc]:
    """Every field of the config dataclass ``cls``, in declaration order."""
    from garen_infer.settings import describe, hints

    comments: dict[str, str] = {}
    for klass in reversed(cls.__mro__):  # a subclass's comment replaces its base's
        if dataclasses.is_dataclass(klass):
            comments.update(field_comments(klass))
    docs, types = [], hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        meaning = f.metadata.get("doc") or comments.get(f.name, "")
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else "(required)")
        docs.append(OptionDoc(f.name, describe(types[f.name]), default, paper_source(meaning), meaning))
    return docs


def field_comments(cls) -> dict[str, str]:
    """field name -> the comments that document it in the class body of ``cls``."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):  # defined where no source can be read (a REPL)
        return {}
    fields = set(cls.__dataclass_fields__)
    comments: dict[str, list[str]] = {}
    above: list[str] = []
    last = None
    lines = source.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        row, col = token.start
        text = token.string.lstrip("#")
        code = lines[row - 1][:col].strip()
        name = re.match(r"(\w+)\s*:", code)
        if name and name.group(1) in fields:  # beside its field
            last = name.group(1)
            comments[last] = [*above, text.strip()]
            above = []
        elif not code and text.startswith("   ") and last is not None:  # "#   ": the comment above goes on
            comments[last].append(text.strip())
        elif not code and not text.strip().startswith("--"):  # "# ---- the loop ----" heads a group
            above.append(text.strip())
            last = None
        _attach_above(comments, above, lines, row, fields)
    return {name: " ".join(parts) for name, parts in comments.items()}


def _attach_above(comments: dict, above: list[str], lines: list[str], row: int, fields: set) -> None:
    """Comment lines just above a field with no comment beside it document that field."""
    if not above or row >= len(lines):
        return
    name = re.match(r"\s*(\w+)\s*:", lines[row])
    if name and name.group(1) in fields and "#" not in lines[row]:
        comments[name.group(1)] = list(above)
        above.clear()


def paper_source(comment: str) -> str:
    """The parenthesised reference of a comment that names a paper section or the reference code, else the
    sections it names."""
    for group in re.findall(r"\(([^()]*)\)", comment):
        if SOURCE_WORDS.search(group):
            return group
    return ", ".join(dict.fromkeys(SECTION.findall(comment)))


def config_for(name: str):
    """The config class ``garen-infer options NAME`` documents: a method's, a preset section's, or a model
    backend's (the settings of a role's model spec)."""
    from garen_infer.configuration.run_config import RunConfig
    from garen_infer.index.first_stage import FirstStageConfig
    from garen_infer.llm.backends import BACKENDS, backend_class
    from garen_infer.methods.base import METHODS, get_method

    sections = {"run": RunConfig, "first_stage": FirstStageConfig}
    if name in sections:
        return sections[name]
    if name in BACKENDS:
        return backend_class(name)
    if name == "embedding":
        from garen_infer.llm.embedding_role import EmbeddingRole

        return EmbeddingRole
    if name not in METHODS:
        raise GarenError(f"no options for '{name}': name a method ({', '.join(METHODS)}), a preset "
                         f"section ({', '.join(sections)}) or a model backend ({', '.join(BACKENDS)}, embedding)")
    return get_method(name).Config


def documented_options(name: str) -> list[OptionDoc]:
    """The options a preset sets for ``name`` (a method, ``run`` or ``first_stage``), documented."""
    from garen_infer.configuration.run_config import RUN_SECTION, RunConfig

    cls = config_for(name)
    return [doc for doc in option_docs(cls) if cls is not RunConfig or doc.name in RUN_SECTION]


def options_text(name: str) -> str:
    """The options of ``name`` as a reader scans them: one block per field."""
    from garen_infer.llm.backends import BACKENDS

    docs = documented_options(name)
    backends = (*BACKENDS, "embedding")
    where = name if name in ("run", "first_stage") else "models.<role>" if name in backends else f"methods.{name}"
    text = _options_block(where, docs)
    if name == "embedding":  # the model that embeds the corpus is set on the index stage: listed with the role's
        from garen_infer.llm.embeddings import EmbeddingParams

        text += "\n" + _options_block("index.embeddings", option_docs(EmbeddingParams))
    return text


def _options_block(where: str, docs: list[OptionDoc]) -> str:
    blocks = [f"{where}: {len(docs)} options (set them in a preset, or with --set {where}.<option>=<value>)"]
    for doc in docs:
        source = f"    [{doc.source}]" if doc.source else ""
        head = f"{doc.name} = {doc.default!r}    {doc.allowed}{source}"
        blocks.append(f"  {head}\n      {doc.meaning or '(undocumented)'}")
    return "\n".join(blocks) + "\n"
