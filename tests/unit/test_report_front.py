"""The report's front page (issue 53, item 6): the verdict table read from table_claim_verdicts.csv renders in
reStructuredText as its own text whatever the labels hold, and the article's size is measured against the
2 MB a browser opens as a data URI."""

from __future__ import annotations

import csv
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from powerlens.pipeline.report_front import KEY, URI_LIMIT, data_uri_length, front_page, rst_text, verdict_class

REPO = Path(__file__).resolve().parents[2]

HOSTILE = [
    "`x`", "a_ b_", "_c", ":role:`x`", ":math:`1`", ".. directive:: x", ".. raw:: html", "|sub|", "|sub|_",
    "`click <javascript:alert(1)>`_", "<javascript:alert(2)>`_", "javascript:alert(3)", "http://example.invalid/x",
    "mail@example.invalid", "[1]_", "[#]_", "[cit]_", "* bullet", "- dash", "1. one", "#. auto", "A. alpha",
    "(i) roman", "**bold** *it*", "``lit``", "back\\slash\\", "line1\nline2\n\n.. raw:: html\n\n   <script>x</script>",
    "a\r\nb\tc", "::", ".. _t: javascript:alert(4)", "__ javascript:alert(5)", "{{ config }}", "{% if x %}",
    "<img src=x onerror=alert(6)>", "&amp; &lt;", "x | y", "= = =", "", "Gemma 3 (trained, 4-bit)",
]


def render(front: dict) -> str:
    """workflow.rst as Snakemake renders it (Jinja with trim_blocks and lstrip_blocks, then docutils'
    publish_parts with the DOCUTILSCONFIG the Snakefile sets), at the level that reports every message."""
    import jinja2
    from docutils.core import publish_parts

    class Snakemake:
        config = {"run": "r", "description": "", "models": {"m": {"arch": "bert"}}, KEY: front}

    text = (REPO / "workflow/report/workflow.rst").read_text()
    old = os.environ.get("DOCUTILSCONFIG")
    os.environ["DOCUTILSCONFIG"] = str(REPO / "workflow/report/docutils.conf")
    try:
        rst = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(text).render(snakemake=Snakemake)
        return publish_parts(rst, writer_name="html", settings_overrides={
            "report_level": 1, "halt_level": 5, "warning_stream": False})["html_body"]
    finally:
        if old is None:
            os.environ.pop("DOCUTILSCONFIG")
        else:
            os.environ["DOCUTILSCONFIG"] = old


class Cells(HTMLParser):
    """Each row of the verdict table (its cells' text, entities decoded) and every element seen."""

    def __init__(self):
        super().__init__()
        self.rows, self.tags, self.depth, self.cell = [], [], 0, None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "table" and "pl-verdicts" in (dict(attrs).get("class") or ""):
            self.depth = 1
        elif self.depth and tag == "table":
            self.depth += 1
        elif self.depth and tag == "tr":
            self.rows.append([])
        elif self.depth and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if self.depth and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif self.depth and tag == "table":
            self.depth -= 1

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def run_folder(tmp_path: Path, header: list[str], rows: list[list[str]]) -> Path:
    out = tmp_path / "paper_tables" / "r"
    out.mkdir(parents=True)
    with open(out / "table_claim_verdicts.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])
    return tmp_path


def shown(text: str) -> str:
    """What a cell should show: its text on one line, white space runs as one space."""
    return " ".join(text.split())


@pytest.mark.parametrize("label", HOSTILE, ids=[f"h{i}" for i in range(len(HOSTILE))])
def test_a_hostile_label_renders_as_its_own_text(tmp_path, label):
    """A label (a column header from the user's config) and a cell holding markup, a link, a role, a
    directive, a substitution or newlines: each renders as its own text in its own cell, with no docutils
    message and no element other than the table's and the page's own links."""
    header = ["claim", "statement", label, f"{label}: matched control (random attention weights)"]
    rows = [["C1", label, f"reproduced (claim p 0.01; attainable p 1e-04) {label}", label]]
    html = render(front_page("r", run_folder(tmp_path, header, rows)))
    assert "system-message" not in html and "System Message" not in html
    p = Cells()
    p.feed(html)
    assert p.rows == [[shown(h) for h in header], [shown(c) for c in rows[0]]]
    links = [a.get("href", "") for t, a in p.tags if t == "a"]
    assert all(h.startswith("javascript:fetch(results[") or h.startswith("javascript:app.setView(") for h in links)
    assert len(links) == 4  # the article, the PDF, claims at a glance, modelling choices
    assert not any(t in ("script", "img", "iframe", "object", "embed", "style") for t, _ in p.tags)


def test_every_cell_is_one_escaped_line():
    """rst_text: one line, every ASCII punctuation character escaped, control characters gone."""
    for text in HOSTILE:
        out = rst_text(text)
        assert "\n" not in out and "\r" not in out and "\t" not in out
        assert not re.search(r"(?<!\\)[`_|*:<>\[\]]", out.replace("\\\\", "")), (text, out)
    assert rst_text("") == "\u00a0" and rst_text("a\x00b\u202ec") == "abc"


def test_verdict_classes_come_from_the_words_only():
    assert [verdict_class(c) for c in ("reproduced (claim p 0.01)", "not reproduced (x)", "inconclusive",
                                       "underpowered (no power)", "-", "reproduced\" onclick=x")] == [
        "pl-yes", "pl-no", "pl-maybe", "pl-weak", "pl-na", "pl-yes"]


def test_the_front_page_shows_the_verdicts_with_colours(tmp_path):
    header = ["claim", "statement", "BERT (trained)", "synthetic layers"]
    rows = [["C1", "tilt", "reproduced (claim p 0.0454; attainable p 1.06e-04) [4 of 6 agree]", "-"],
            ["C2", "consensus", "not reproduced (claim p 0.7)", "reproduced"]]
    html = render(front_page("r", run_folder(tmp_path, header, rows)))
    p = Cells()
    p.feed(html)
    assert p.rows == [header, *rows]
    classes = [a["class"].split()[0] for t, a in p.tags if t == "p" and (a.get("class") or "").startswith("pl-")]
    assert classes[:3] == ["pl-family"] * 3  # the header's family columns (a control's would be pl-control-head)
    assert classes[3:] == ["pl-text", "pl-text", "pl-yes", "pl-na", "pl-text", "pl-text", "pl-no", "pl-yes"]
    assert "paper_tables/r/table_claim_verdicts.csv" in html and "Note:" not in html


def test_without_the_table_the_page_points_to_claims_at_a_glance(tmp_path):
    html = render(front_page("r", tmp_path))
    assert "pl-verdicts" not in html and "Claims at a glance" in html and "system-message" not in html


def test_an_article_over_the_data_uri_limit_is_named_with_its_file(tmp_path):
    """Over 2 MB as a data URI, the report's result list opens a blank pane: the front page says so and names
    the file; the data URI's length is the one Snakemake makes."""
    from snakemake.report.common import data_uri_from_file

    out = tmp_path / "results" / "r"
    out.mkdir(parents=True)
    big, pdf = out / "replication.html", out / "replication.pdf"
    big.write_bytes(b"<title>t</title>" + b"x" * (URI_LIMIT * 3 // 4 + 10))
    pdf.write_bytes(b"%PDF-1.4 small")
    assert data_uri_length(big) == len(data_uri_from_file(big)) > URI_LIMIT
    assert data_uri_length(pdf) == len(data_uri_from_file(pdf)) <= URI_LIMIT
    front = front_page("r", tmp_path)
    assert not front["article"]["fits"] and front["pdf"]["fits"]
    html = render(front)
    note = re.search(r"Note:</strong>(.*?)</p>", html, re.S).group(1)
    assert "results/r/replication.html" in note and "blank pane" in note and "replication.pdf" not in note
