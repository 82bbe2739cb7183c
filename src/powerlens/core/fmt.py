"""The one number format of every table, claim text and figure note, weights labels as text, and text as each
table format holds it (CSV without formulas, Markdown without markup, LaTeX without commands). No import of the
rest of the package: tables, claims and the command line all use it."""

from __future__ import annotations

import re

import numpy as np

DASH = "-"


def fmt_num(x) -> str:
    """The one number format of every table and claim text: 3 significant digits, plain between 0.01 and
    1000 in magnitude ("0.0431", "256"), scientific outside ("1.00e-03", "2.91e-04", "1.14e+04": never "0.001"
    beside "6.00e-04"); integers as they are; a missing value (NaN, None) as a dash."""
    if x is None:
        return DASH
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if np.isnan(x):
        return DASH
    if x == 0 or not np.isfinite(x):
        return f"{x:g}"
    if x == round(x) and abs(x) < 1e5:
        return str(int(x))
    return f"{x:.3g}" if 1e-2 <= abs(x) < 1000 else f"{x:.2e}"


def is_random_label(label: str) -> bool:
    """Random weights of any kind: an architecture twin ("random weights") or a matched control ("random layer
    weights"): never evidence, drawn and listed apart from trained models."""
    return str(label).startswith("random")


def weights_text(label: str) -> str:
    """A weights label without nested brackets, for text that puts it in brackets itself:
    "trained, 4-bit (Q4_K_M)" -> "trained, 4-bit Q4_K_M"."""
    return label.replace(" (", " ").replace(")", "") if "(" in label else label


def sci(x: float) -> str:
    """A tolerance as written in the spec: 1e-9, 2.5e-3 (3 significant digits at most, no trailing zeros and no
    zero-padded exponent, unlike format "g")."""
    mant, exp = f"{x:.2e}".split("e")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}e{int(exp)}"


#: What a spreadsheet reads as the start of a formula (OWASP, "CSV injection"): a text cell starting with one of
#: these gets a leading ``'``, which Excel, LibreOffice and Google Sheets show as text and never evaluate.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?|[-+]?inf")


def csv_text(cell) -> str:
    """A CSV cell that no spreadsheet runs as a formula: text starting with ``=``, ``+``, ``-``, ``@``, a tab or a
    carriage return is prefixed with ``'``. A number as :func:`fmt_num` writes it ("-0.5", "-8.75e-05", "-inf")
    and the missing-value dash are left as they are (byte for byte: they are values, not formulas)."""
    text = str(cell)
    if not text.startswith(FORMULA_START) or text == DASH or _NUMBER.fullmatch(text):
        return text
    return "'" + text


def csv_untext(cell: str) -> str:
    """A CSV cell's text as it was before :func:`csv_text` guarded it (the ``'`` removed), for a reader of the
    project's own CSVs (the article shows a model's name, not its spreadsheet guard)."""
    text = str(cell)
    if text.startswith("'") and csv_text(text[1:]) == text:
        return text[1:]
    return text


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
        "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "|": r"\textbar{}", "<": r"\textless{}",
        ">": r"\textgreater{}", "[": "{[}"}


def tex_escape(text) -> str:
    """Text as LaTeX text: every special character escaped (a cell, a header or the caption can never become
    a command), characters beyond Latin-1, which pdflatex cannot typeset without extra packages, written
    as [U+XXXX] (control characters too), line breaks as spaces (a blank line inside a cell or the caption is
    a paragraph break, which stops LaTeX there) and ``[`` braced (a row starting with ``[`` would be read as the
    optional argument of the previous row's ``\\``)."""
    out = []
    for ch in str(text):
        if ch == "\n":
            out.append(" ")
        elif ch in _TEX:
            out.append(_TEX[ch])
        elif ord(ch) > 0xFF or 0x7F <= ord(ch) < 0xA0 or (ord(ch) < 0x20 and ch != "\t"):
            out.append(f"{{[}}U+{ord(ch):04X}]")  # braced, as any [
        else:
            out.append(ch)
    return "".join(out)


#: Characters that are Markdown syntax inside a line (CommonMark and GFM): backslash-escaped, which every
#: CommonMark renderer shows as the character itself (GFM's ``~`` strikethrough and ``$`` math included).
_MD_INLINE = "\\`*_[]|~$"
#: HTML-significant characters as entities (CommonMark passes raw HTML through; an entity is shown as text by
#: every Markdown renderer, unlike ``\\<``, which some non-CommonMark renderers leave as a backslash and a tag).
_MD_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
#: A line starting with one of these (after the inline escapes) is a block of its own: heading, list item, quote,
#: thematic break or setext underline.
_MD_BLOCK = re.compile(r"^(#|[-+=]|\d{1,9}(?=[.)]))")


def md_escape(text: str) -> str:
    """Text as one Markdown table cell, shown literally by any CommonMark renderer: markup (``*``, ``_``,
    backticks, ``[``, ``]``, ``~``, ``$``, ``\\``) backslash-escaped, ``<``, ``>`` and ``&`` as entities (a
    config label is data: a ``<script>`` in it never reaches a page as a tag), ``|`` escaped (it would end the
    cell), line breaks (LF, CR) as spaces. Numbers are left as they are (no digit, ``.``, ``-`` or ``e`` is
    escaped)."""
    out = []
    for ch in str(text):
        if ch in _MD_HTML:
            out.append(_MD_HTML[ch])
        elif ch in _MD_INLINE:
            out.append("\\" + ch)
        elif ch in "\r\n":
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def md_paragraph(text: str) -> str:
    """Text as a Markdown paragraph or list item's text (the caption, a footnote): :func:`md_escape`, and a
    leading ``#``, ``-``, ``+``, ``=`` or ``1.`` escaped, so the text never opens a heading, list or rule."""
    text = md_escape(str(text).strip())
    m = _MD_BLOCK.match(text)
    if not m:
        return text
    if m.group(1)[0].isdigit():  # "1. x": the list marker is the punctuation after the number
        return m.group(1) + "\\" + text[m.end():]
    return "\\" + text
