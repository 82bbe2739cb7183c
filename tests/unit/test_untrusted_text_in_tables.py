"""Issue 52, text a reader sees: a hostile model label stays text in every form of a table (Markdown read by a
real CommonMark renderer, CSV opened in a spreadsheet, LaTeX, HTML), in the article's Typst source, and cannot
widen a figure; numbers are written byte for byte as before."""

import re
import struct

import numpy as np
import pandas as pd
import pytest

from powerlens.core.errors import PowerlensError
from powerlens.core.fmt import csv_text
from powerlens.outputs.tables import md_escape, md_paragraph, tex_escape, write_table

from .test_tables_for_readers import html_cells, tex_cells

SCRIPT = "GPT2 <script>alert(1)</script>"
#: Labels that are markup in Markdown (raw HTML, emphasis, code, links, images, autolinks, strikethrough, math,
#: entities, escapes, a pipe) or a formula in a spreadsheet.
HOSTILE = [SCRIPT, "<img src=x onerror=alert(1)>", "*bold* _em_ **b** __u__", "`code` ``x``", "[link](http://e.x)",
           "![img](http://e.x/a.png)", "<http://e.x>", "~~gone~~", "$x^2$", "&lt;b&gt; &amp; &copy;", r"a\*b\\",
           "a|b", "# heading", "- item", "1. first", "> quote", "=HYPERLINK(\"http://e.x\",\"click\")", "+1+1",
           "-2+3", "@SUM(A1)", "\tx"]
NUMBERS = [-0.5, -8.75e-05, 0.000291, -np.inf, 256.0, np.nan]


def _renderer():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _hostile_table(tmp_path, caption="Caption: # not a heading *not em* <b>x</b>"):
    df = pd.DataFrame({"model": HOSTILE, "value": (NUMBERS * 4)[:len(HOSTILE)]})
    write_table(df.rename(columns={"value": "=cmd|' /C calc'!A0"}), tmp_path / "t", caption=caption,
                missing={"=cmd|' /C calc'!A0": "# a *footnote* <i>x</i>"})
    return tmp_path / "t"


# --- Markdown -----------------------------------------------------------------------------------------------

def test_markdown_table_renders_hostile_labels_as_their_own_text(tmp_path):
    """CommonMark (markdown-it, with GFM's table and strikethrough) renders each cell as exactly the label's
    characters: no tag, emphasis, code, link, image or heading comes out of a label."""
    stem = _hostile_table(tmp_path)
    html = _renderer().render(stem.with_suffix(".md").read_text())
    for tag in ("<script", "<img", "<em>", "<strong>", "<code>", "<a ", "<s>", "<del>", "<h1>", "<h2>", "<ol",
                "<blockquote", "<hr"):
        assert tag not in html, tag
    cells = html_cells(html)
    assert [r[0] for r in cells[1:]] == [" ".join(h.split()) for h in HOSTILE]
    assert cells[0][1] == "=cmd|' /C calc'!A0"
    # the caption and the footnote are paragraphs: text, not a heading or a nested list
    assert "<p>Caption: # not a heading *not em* &lt;b&gt;x&lt;/b&gt;</p>" in html
    assert html.count("<li>") == 1 and "# a *footnote* &lt;i&gt;x&lt;/i&gt;" in html


def test_the_old_markdown_escape_let_a_script_through():
    """The check above can fail: escaping only pipes (the escape before issue 52) leaves a live tag."""
    old = "| model |\n|---|\n| " + SCRIPT.replace("|", "\\|") + " |\n"
    assert "<script>" in _renderer().render(old)
    new = "| model |\n|---|\n| " + md_escape(SCRIPT) + " |\n"
    assert "<script>" not in _renderer().render(new)


@pytest.mark.parametrize("text", ["# h", "- x", "+ x", "= x", "1. x", "12) x", "---", "***", "  # indented"])
def test_a_caption_never_opens_a_block(text):
    html = _renderer().render(md_paragraph(text) + "\n")
    assert html.startswith("<p>") and html.count("<") == 2, html


def test_numbers_are_not_escaped_in_markdown(tmp_path):
    """Every number keeps its bytes in the Markdown form (no digit, '.', '-', '+' or 'e' escaped)."""
    df = pd.DataFrame({"x": NUMBERS, "range": ["[-0.5, 2.91e-04]"] * len(NUMBERS)})
    write_table(df, tmp_path / "n")
    md = (tmp_path / "n.md").read_text()
    for s in ("-0.5", "-8.75e-05", "2.91e-04", "-inf", "256"):
        assert re.search(rf"\| {re.escape(s)}\s+\|", md), s
    assert "\\[-0.5, 2.91e-04\\]" in md


# --- CSV ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cell, want", [("=HYPERLINK(\"x\")", "'=HYPERLINK(\"x\")"), ("+1+1", "'+1+1"),
                                        ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"),
                                        ("\rx", "'\rx"), ("- (post-norm)", "'- (post-norm)"),
                                        ("-0.5", "-0.5"), ("-8.75e-05", "-8.75e-05"), ("-inf", "-inf"),
                                        ("-1.00e-03", "-1.00e-03"), ("-", "-"), ("GPT-2", "GPT-2"), ("", "")])
def test_csv_text_neutralises_formulas_only(cell, want):
    assert csv_text(cell) == want


def test_csv_cells_never_start_a_formula_and_numbers_stay(tmp_path):
    stem = _hostile_table(tmp_path)
    raw = pd.read_csv(stem.with_suffix(".csv"), dtype=str, keep_default_na=False)
    assert raw.columns[1] == "'=cmd|' /C calc'!A0"
    for h, cell in zip(HOSTILE, raw["model"]):
        assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
        assert cell == ("'" + h if h[0] in "=+-@\t" else h)  # only the quote added; the text is all there
    # numbers and the missing-value dash are byte for byte what fmt_num writes
    assert list(raw.iloc[:, 1])[:6] == ["-0.5", "-8.75e-05", "2.91e-04", "-inf", "256", "-"]


# --- LaTeX and HTML -----------------------------------------------------------------------------------------

def test_latex_cells_hold_no_command_no_paragraph_and_no_optional_argument(tmp_path):
    df = pd.DataFrame({"model": ["[2pt] x", "a\n\nb", r"\input{/etc/passwd}", "\x01"], "v": [1.5, 2.5, 3.5, 4.5]})
    write_table(df, tmp_path / "t", caption="c\n\nd")
    tex = (tmp_path / "t.tex").read_text()
    body = tex.split("\\midrule", 1)[1]
    assert "\n\n" not in tex  # a blank line is \par: LaTeX stops inside a tabular or a caption
    assert re.search(r"\\\\\s*\[", body) is None  # no row starts with [ (read as \\[2pt]: "Missing number")
    assert "{[}2pt] x" in body and r"\textbackslash{}input\{/etc/passwd\}" in body and "{[}U+0001]" in body
    assert [r[0] for r in tex_cells(tex)] == ["model", "{[}2pt] x", "a  b", r"\textbackslash{}input\{/etc/passwd\}",
                                             "{[}U+0001]"]
    assert tex_escape("1.5e-03") == "1.5e-03"


def test_html_table_shows_hostile_labels_as_text(tmp_path):
    stem = _hostile_table(tmp_path)
    html = stem.with_suffix(".html").read_text()
    assert "<script" not in html and "<img" not in html
    assert [r[0] for r in html_cells(html)[1:]] == HOSTILE


# --- figures and the config ---------------------------------------------------------------------------------

def _png_width(path) -> int:
    return struct.unpack(">I", path.read_bytes()[16:20])[0]


def test_a_long_label_cannot_widen_a_figure(tmp_path):
    """fig_gap with a 3000-character label is as wide as with a short one (before: about 58,000 px)."""
    from powerlens.outputs.figures import fig_gap
    from powerlens.outputs.plotting import FIGURE_TEXT_MAX, panel_title

    df = pd.DataFrame({"model": ["m"] * 3, "layer": [0, 1, 2], "leading_type": ["real positive"] * 3,
                       "ratio_next": [0.5, 0.6, 0.7], "abs_lambda1": [1.0, 2.0, 3.0]})
    widths = {}
    for name, label in (("short", "GPT-2"), ("long", "L" * 1500 + "$x^" + "R" * 1500)):
        fig_gap(df, {"m": label}, {"m": "trained"}, tmp_path / name, 40)
        widths[name] = _png_width(tmp_path / f"{name}.png")
    assert widths["long"] <= widths["short"] * 1.1, widths
    title = panel_title("L" * 1500 + "$x^" + "R" * 1500, "random weights")
    name = title[:-len(" (random weights)")]  # the label cut in its middle to the schema's 64 characters
    assert title.endswith(" (random weights)") and len(name) == FIGURE_TEXT_MAX and name.count("\u2026") == 1
    assert name.startswith("L" * 20) and name.endswith("R" * 19)
    assert panel_title("GPT-2 $x", "trained, 4-bit (Q4_1)") == r"GPT-2 \$x (4-bit Q4_1)"  # short: unchanged
    assert len(panel_title("x" * 64, "trained")) == FIGURE_TEXT_MAX


def test_the_schema_bounds_a_label_and_says_so_briefly():
    from .test_untrusted_text import patched, validate

    validate(patched(**{"models/tiny-gpt2/label": "x" * 64}))
    with pytest.raises(PowerlensError) as e:
        validate(patched(**{"models/tiny-gpt2/label": "x" * 3000}))
    assert "models.tiny-gpt2.label: 3000 characters, more than the 64 allowed" in e.value.problem
    assert len(e.value.problem) < 200 and "64 characters" in e.value.fix


def test_schema_copies_are_one_file(repo):
    """workflow/schemas/config.schema.yaml is a link to the package's schema: one source, nothing to sync."""
    link = repo / "workflow/schemas/config.schema.yaml"
    assert link.resolve() == (repo / "src/powerlens/pipeline/config.schema.yaml").resolve()


# --- the article --------------------------------------------------------------------------------------------

def test_a_hostile_family_name_is_text_in_the_article_pdf(tmp_path):
    """A label reaches the article as a verdict column and a heading: Typst string literals, never markup."""
    import pypdf
    import typst

    from powerlens.outputs.render import to_html, to_typst

    fam = '#panic("x") ]) *b* $y$ <script>'
    blocks = [("h", 3, [fam]), ("table", ["claim", fam], [[(["C1"], ""), (["reproduced"], "reproduced")]]),
              ("dl", [(fam, [fam])])]
    src = to_typst(blocks, tmp_path)
    (tmp_path / "a.pdf").write_bytes(typst.compile(src.encode(), root=str(tmp_path)))
    text = "".join(p.extract_text() for p in pypdf.PdfReader(tmp_path / "a.pdf").pages)
    assert text.count('#panic("x") ]) *b* $y$ <script>') == 4
    assert "<script>" not in to_html(blocks)


@pytest.mark.parametrize("label", ["=HYPERLINK(\"http://x\")", "+1 model", "-m-", "@home", "'quoted", "plain", "-0.5",
                                   "-"])
def test_a_reader_of_the_tables_sees_the_label_not_its_spreadsheet_guard(label, tmp_path):
    """#69: the CSV's formula guard (a leading ') showed in the article's model names. The article's and the
    report's readers undo it; the CSV itself stays guarded."""
    import pandas as pd

    from powerlens.core.fmt import csv_text, csv_untext
    from powerlens.outputs.tables import write_table
    from powerlens.outputs.trace import read_table
    from powerlens.pipeline.report_front import rst_text, verdict_rows

    assert csv_untext(csv_text(label)) == label
    write_table(pd.DataFrame({"claim": ["C1"], label: [label]}), tmp_path / "t")
    raw = (tmp_path / "t.csv").read_text()
    if label.startswith(("=", "+", "@")) or label == "-m-":
        assert "'" + label.replace('"', '""') in raw  # still guarded in the file a spreadsheet opens
    df = read_table(tmp_path / "t.csv")
    assert list(df.columns) == ["claim", label] and df.iloc[0][label] == label
    rows = verdict_rows(tmp_path / "t.csv")
    assert rows["rows"][0][1]["text"] == rst_text(label) and rows["header"][1] == rst_text(label)


def test_generated_text_is_guarded_in_the_csv_and_shown_as_generated(tmp_path):
    """#69: the continuations CSV kept `=cmd|' /C calc'!A0` unguarded. The steering step guards the generated
    text columns (CONTINUATION_TEXT) as every table CSV is guarded; table_continuations shows the text itself."""
    import pandas as pd

    from powerlens.analysis.steering import CONTINUATION_COLUMNS, CONTINUATION_TEXT  # as the steering step reads them
    from powerlens.core.fmt import csv_text
    from powerlens.core.io import write_csv
    from powerlens.outputs.tables import continuations_table, write_table

    evil = "=cmd|' /C calc'!A0"
    row = {c: "x" for c in CONTINUATION_COLUMNS} | {"model": "m", "kappa": 4.0, "weights": "trained weights",
                                                      "prompt": evil, "rank-1 (last layer O')": "+SUM(A1)"}
    df = pd.DataFrame([row], columns=CONTINUATION_COLUMNS)
    for c in CONTINUATION_TEXT:  # as the steering step writes it
        df[c] = df[c].map(csv_text)
    write_csv(tmp_path / "c.csv", df)
    raw = (tmp_path / "c.csv").read_text()
    assert "'=cmd" in raw and "'+SUM" in raw and ",=cmd" not in raw
    t = continuations_table([pd.read_csv(tmp_path / "c.csv", keep_default_na=False)])
    assert t.iloc[0]["prompt"] == evil and t.iloc[0]["rank-1 (last layer O')"] == "+SUM(A1)"
    write_table(t, tmp_path / "table_continuations")
    assert "'=cmd" in (tmp_path / "table_continuations.csv").read_text()  # the table's CSV guarded again
    assert "''=cmd" not in (tmp_path / "table_continuations.csv").read_text()
