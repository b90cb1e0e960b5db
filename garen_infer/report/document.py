"""A report as a list of blocks (headings, paragraphs, tables, figures, code), rendered twice: Markdown that links
its PNGs, and one self-contained HTML file with the PNGs inlined, so either opens without a server.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

from garen_infer.storage.atomic import write_text


@dataclass(frozen=True)
class Cell:
    """A table cell: text, marked best (bold) or second best (underlined) as the paper's tables do."""

    text: str
    bold: bool = False
    underline: bool = False
    numeric: bool = True


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    text: str  # Markdown inline syntax: **bold**, `code`, [text](link)


@dataclass
class Table:
    header: list[str]
    rows: list[list[Cell | str]]
    caption: str = ""


@dataclass
class Figure:
    path: Path  # a PNG inside the report folder
    caption: str


@dataclass
class Code:
    text: str
    language: str = ""


@dataclass
class Document:
    title: str
    blocks: list = field(default_factory=list)

    def add(self, *blocks) -> Document:
        self.blocks.extend(blocks)
        return self

    def write(self, folder: Path, stem: str = "report") -> None:
        write_text(folder / f"{stem}.md", to_markdown(self, folder))
        write_text(folder / f"{stem}.html", to_html(self))


def _cell(c: Cell | str) -> Cell:
    return c if isinstance(c, Cell) else Cell(str(c), numeric=False)


# ---- Markdown ---------------------------------------------------------------------------------------------------
def _md_cell(c: Cell) -> str:
    text = c.text.replace("|", "\\|")
    if c.bold:
        text = f"**{text}**"
    if c.underline:
        text = f"<u>{text}</u>"
    return text


def table_markdown(table: Table) -> str:
    first = [_cell(c) for c in table.rows[0]] if table.rows else []
    aligns = ["---:" if i < len(first) and first[i].numeric and i > 0 else "---" for i in range(len(table.header))]
    lines = ["| " + " | ".join(table.header) + " |", "|" + "|".join(aligns) + "|"]
    lines += ["| " + " | ".join(_md_cell(_cell(c)) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def to_markdown(doc: Document, folder: Path) -> str:
    parts = [f"# {doc.title}"]
    for block in doc.blocks:
        if isinstance(block, Heading):
            parts.append(f"{'#' * block.level} {block.text}")
        elif isinstance(block, Paragraph):
            parts.append(block.text)
        elif isinstance(block, Table):
            parts.append((f"{block.caption}\n\n" if block.caption else "") + table_markdown(block))
        elif isinstance(block, Figure):
            rel = Path(block.path).resolve().relative_to(Path(folder).resolve()).as_posix()
            parts.append(f"![{block.caption}]({rel})\n\n*{block.caption}*")
        elif isinstance(block, Code):
            parts.append(f"```{block.language}\n{block.text.rstrip()}\n```")
    return "\n\n".join(parts) + "\n"


# ---- HTML -------------------------------------------------------------------------------------------------------
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25rem 0.6rem; }
th { border-bottom: 2px solid #444; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; color: #444; padding-bottom: 0.3rem; }
figure { margin: 1rem 0 2rem; } figure img { max-width: 100%; } figcaption { color: #444; font-size: 0.9rem; }
pre { background: #f6f6f6; padding: 0.8rem; overflow-x: auto; font-size: 0.85rem; }
code { background: #f6f6f6; padding: 0 0.2rem; }
"""


def _inline(text: str) -> str:
    """The little Markdown inline syntax paragraphs use: `code`, **bold**, [text](link)."""
    import re

    out = html.escape(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)
    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", r'<a href="\2">\1</a>', out)


def _html_cell(c: Cell) -> str:
    text = html.escape(c.text)
    if c.bold:
        text = f"<b>{text}</b>"
    if c.underline:
        text = f"<u>{text}</u>"
    return f'<td class="num">{text}</td>' if c.numeric else f"<td>{text}</td>"


def table_html(table: Table) -> str:
    caption = f"<caption>{_inline(table.caption)}</caption>" if table.caption else ""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    body = "".join("<tr>" + "".join(_html_cell(_cell(c)) for c in row) + "</tr>" for row in table.rows)
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def to_html(doc: Document) -> str:
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(doc.title)}</title>",
             f"<style>{STYLE}</style></head><body><h1>{html.escape(doc.title)}</h1>"]
    for block in doc.blocks:
        if isinstance(block, Heading):
            parts.append(f"<h{block.level}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            parts.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Table):
            parts.append(table_html(block))
        elif isinstance(block, Figure):
            data = base64.b64encode(Path(block.path).read_bytes()).decode("ascii")
            parts.append(f"<figure><img alt='{html.escape(block.caption)}' src='data:image/png;base64,{data}'>"
                         f"<figcaption>{_inline(block.caption)}</figcaption></figure>")
        elif isinstance(block, Code):
            parts.append(f"<pre><code>{html.escape(block.text)}</code></pre>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
