"""What a reader meets in the tables and the report's texts: one number format, no nan, Markdown that renders,
captions that docutils renders without a message."""

import os
import re

import numpy as np
import pandas as pd
import pytest

from powerlens.outputs.tables import fmt_num, weights_text, write_table

from ..conftest import REPO


@pytest.mark.parametrize("x, want", [(0.0431, "0.0431"), (-8.75e-05, "-8.75e-05"), (0.000291, "2.91e-04"),
                                     (256.0, "256"), (11400.2, "1.14e+04"), (float("nan"), "-"), (None, "-"),
                                     (3, "3"), (0.0, "0"), (1.0, "1"), (0.99, "0.99"),
                                     (0.001, "1.00e-03"), (0.0011, "1.10e-03"), (0.01, "0.01")])
def test_one_number_format(x, want):
    assert fmt_num(x) == want


def test_weights_label_without_nested_brackets():
    assert weights_text("trained, 4-bit (Q4_K_M)") == "trained, 4-bit Q4_K_M"
    assert weights_text("random weights") == "random weights"


def _md_cells(md: str) -> list[list[str]]:
    """The text of every cell of every row, as a GFM renderer (markdown-it, table rule) reads the Markdown: a
    renderer drops the cells an unescaped | adds beyond the header's count, so the text is what to compare."""
    from markdown_it import MarkdownIt

    rows, row, inside = [], [], False
    for t in MarkdownIt("commonmark").enable("table").parse(md):
        if t.type == "tr_open":
            row = []
        elif t.type in ("th_open", "td_open"):
            inside = True
            row.append("")
        elif t.type in ("th_close", "td_close"):
            inside = False
        elif t.type == "inline" and inside:
            row[-1] = "".join(c.content if c.type == "text" else f"{c.markup}{c.content}{c.markup}"
                              for c in (t.children or []) if c.type in ("text", "code_inline")) or t.content
        elif t.type == "tr_close":
            rows.append(row)
    return rows


def test_write_table_escapes_pipes_and_explains_dashes(tmp_path):
    df = pd.DataFrame({"model": ["a|b", "c"], "|cos|": [0.5, np.nan], "note": ["x || y", None]})
    write_table(df, tmp_path / "t", caption="caption with |lambda_1|", missing={"|cos|": "not measured here"})
    md = (tmp_path / "t.md").read_text()
    assert _md_cells(md) == [["model", "|cos|", "note"], ["a|b", "0.5", "x || y"], ["c", "-", "-"]]
    assert 'A dash in "|cos|" means: not measured here.' in (tmp_path / "t.html").read_text().replace("&quot;", '"')
    assert "nan" not in md and "None" not in md
    csv = pd.read_csv(tmp_path / "t.csv", keep_default_na=False)
    assert list(csv["|cos|"]) == ["0.5", "-"] and list(csv["model"]) == ["a|b", "c"]  # CSV keeps the text
    assert r"\textbar{}" in (tmp_path / "t.tex").read_text()


def test_unescaped_pipes_would_break_the_markdown(tmp_path):
    """The check above can fail: the same table written by pandas alone reads back as other cells."""
    df = pd.DataFrame({"model": ["a|b", "c"], "v": ["1", "2"]})
    assert _md_cells(df.to_markdown(index=False)) != [["model", "v"], ["a|b", "1"], ["c", "2"]]


CAPTIONS = sorted((REPO / "workflow/report").glob("*.rst"))


@pytest.mark.parametrize("rst", CAPTIONS, ids=[p.name for p in CAPTIONS])
def test_report_texts_render_without_a_docutils_message(rst):
    """Every caption and the front page, with Jinja's expressions replaced by a word, render in docutils with no
    message at any level (an unescaped |lambda_1| is an undefined substitution, an ERROR in the report)."""
    from docutils.core import publish_parts

    text = rst.read_text()
    text = re.sub(r"\{#.*?#\}", "", text, flags=re.S)
    text = re.sub(r"\{%.*?%\}", "", text, flags=re.S)
    text = re.sub(r"\{\{.*?\}\}", "x", text, flags=re.S)
    old = os.environ.get("DOCUTILSCONFIG")
    os.environ["DOCUTILSCONFIG"] = str(REPO / "workflow/report/docutils.conf")
    try:
        html = publish_parts(text, writer_name="html", settings_overrides={"report_level": 1, "halt_level": 5,
                                                                          "warning_stream": False})["html_body"]
    finally:
        if old is None:
            os.environ.pop("DOCUTILSCONFIG")
        else:
            os.environ["DOCUTILSCONFIG"] = old
    assert "system-message" not in html, rst.name


def html_cells(text: str) -> list[list[str]]:
    """The text of every cell of every row of the HTML form (the report shows it), entities decoded."""
    from html.parser import HTMLParser

    class P(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.cell = [], None

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.cell = ""

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.cell is not None:
                self.rows[-1].append(self.cell)
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

    parser = P()
    parser.feed(text)
    return parser.rows


def tex_cells(text: str) -> list[list[str]]:
    """Cells of the LaTeX form: the header and body rows of its tabular, split at unescaped &."""
    body = text.split("\\toprule", 1)[1].split("\\bottomrule", 1)[0].replace("\\midrule", "")
    rows = [r.strip() for r in re.split(r"\\\\\s*\n", body) if r.strip()]
    return [[c.strip() for c in re.split(r"(?<!\\)&", r)] for r in rows]


def csv_cells(csv) -> list[list[str]]:
    df = pd.read_csv(csv, keep_default_na=False, dtype=str)
    return [list(df.columns)] + [list(r) for r in df.itertuples(index=False)]


def same_cells_in_every_form(csv) -> None:
    """The Markdown (as a GFM renderer reads it), HTML and LaTeX forms of a table hold the CSV's cells."""
    from powerlens.outputs.tables import tex_escape

    def norm(rows):
        return [[" ".join(str(c).split()) for c in r] for r in rows]

    want = norm(csv_cells(csv))
    assert norm(_md_cells(csv.with_suffix(".md").read_text())) == want, (csv.name, "md")
    assert norm(html_cells(csv.with_suffix(".html").read_text())) == want, (csv.name, "html")
    assert norm(tex_cells(csv.with_suffix(".tex").read_text())) == norm([[tex_escape(c) for c in r] for r in want]), \
        (csv.name, "tex")


def test_every_form_holds_the_same_cells(tmp_path):
    df = pd.DataFrame({"model": ["a|b & c", "d_e"], "|cos|": [0.5, np.nan], "text": ["x {y} $z", "<b>"]})
    write_table(df, tmp_path / "t", caption="c")
    same_cells_in_every_form(tmp_path / "t.csv")
    broken = (tmp_path / "t.md").read_text().replace("a\\|b", "a|b")  # an unescaped pipe
    (tmp_path / "t.md").write_text(broken)
    with pytest.raises(AssertionError):
        same_cells_in_every_form(tmp_path / "t.csv")
