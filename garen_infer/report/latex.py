"""The report's tables as LaTeX for a paper: booktabs rules, the best value per column in bold and the second
underlined as in the Markdown, significance marks as superscript triangles. Needs ``\\usepackage{booktabs,amssymb}``.

A table fits a two-column page: ``\\small`` type, a table of more than ``COLUMN_FIT`` columns spans both columns
(``table*``), the caption is the first sentence of the report's caption and the rest is a footnote-size note
under the rules.
"""

from __future__ import annotations

import re

from garen_infer.report.document import Table, _cell

# characters LaTeX reads as commands, then the report's few non-ASCII symbols
ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
           "}": r"\}",
           "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
SYMBOLS = {"▲": r"$^{\blacktriangle}$", "▼": r"$^{\blacktriangledown}$", "—": "--", "Δ": r"$\Delta$",
           "↳": r"$\hookrightarrow$",
           "’": "'", "×": r"$\times$", "≥": r"$\geq$", "≤": r"$\leq$", "<": r"$<$", ">": r"$>$"}


def escape(text: str) -> str:
    out = "".join(ESCAPES.get(ch, ch) for ch in text)
    for symbol, latex in SYMBOLS.items():
        out = out.replace(symbol, latex)
    return out


def _inline(text: str) -> str:
    """A caption's Markdown (`code`, **bold**) as LaTeX."""
    parts = re.split(r"(`[^`]+`|\*\*[^*]+\*\*)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(r"\texttt{" + escape(part[1:-1]) + "}")
        elif part.startswith("**") and part.endswith("**") and len(part) > 3:
            out.append(r"\textbf{" + escape(part[2:-2]) + "}")
        else:
            out.append(escape(part))
    return "".join(out)


def _latex_cell(c) -> str:
    c = _cell(c)
    text = escape(c.text.strip())
    if c.bold:
        text = r"\textbf{" + text + "}"
    if c.underline:
        text = r"\underline{" + text + "}"
    return text


COLUMN_FIT = 6  # columns of numbers that fit one column of a two-column page in \small type


def table_latex(table: Table, label: str = "") -> str:
    """One ``table`` (or page-wide ``table*``) environment: a one-sentence caption above, booktabs rules, numeric
    columns right-aligned, the caption's other sentences as a note below."""
    first = [_cell(c) for c in table.rows[0]] if table.rows else []
    spec = "".join("r" if i and i < len(first) and first[i].numeric else "l" for i in range(len(table.header)))
    environment = "table*" if len(table.header) > COLUMN_FIT else "table"
    title, _, note = (table.caption or "").partition(". ")
    lines = [r"\begin{" + environment + "}[t]", r"\centering", r"\small"]
    if title:
        lines.append(r"\caption{" + _inline(title.rstrip(".") + ".") + "}")
    if label:
        lines.append(r"\label{" + label + "}")
    lines += [r"\begin{tabular}{" + spec + "}", r"\toprule",
              " & ".join(escape(h) for h in table.header) + r" \\", r"\midrule"]
    lines += [" & ".join(_latex_cell(c) for c in row) + r" \\" for row in table.rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    if note:
        lines.append(r"\par\smallskip\parbox{\linewidth}{\footnotesize " + _inline(note) + "}")
    lines.append(r"\end{" + environment + "}")
    return "\n".join(lines)


def document_latex(tables: list[tuple[Table, str]]) -> str:
    """Every (table, label) in order, with the packages they need named at the top."""
    head = "% Tables of a garen-infer bench report. Preamble: \\usepackage{booktabs,amssymb}\n"
    return head + "\n\n".join(table_latex(t, label) for t, label in tables) + "\n"
