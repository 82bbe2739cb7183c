"""The replication article: one document that answers "which claims hold, and how sure are we", drawn from a
run's output files alone.

Every number and verdict a reader sees is a *traced* value: it is written as
``<span class="t" data-src="<file>" data-loc="<locator>">text</span>``, where the file is an output of the
run (relative to the working directory) and the locator names the field (a CSV row by its key columns and a
column, a JSON path, or a count over a table's cells). :func:`untraced` reads every such span back from the
written HTML and compares it with its source; the rule refuses to write an article with a mismatch, and the
test shows it failing on a doctored copy. Text typed in the template holds no number of the run.
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd

#: The verdict words (paper.md section 4c) in the order the abstract counts them.
WORDS = ("reproduced", "not reproduced", "inconclusive")
DASH = "-"


@dataclass
class Traced:
    """A value shown to the reader and where it comes from."""

    text: str
    src: str  # an output file, relative to the run's working directory
    loc: dict  # {"row": {col: value, ...}, "col": name} | {"json": [keys]} | {"count": word}

    def html(self, cls: str = "") -> str:
        return (f'<span class="t{" " + cls if cls else ""}" data-src="{html.escape(self.src)}" '
                f'data-loc="{html.escape(json.dumps(self.loc, sort_keys=True))}">{html.escape(self.text)}</span>')


def csv_cell(src: str, root: Path, row: dict, col: str) -> Traced:
    """The cell of ``col`` in the one row of the CSV ``src`` whose key columns equal ``row``."""
    df = pd.read_csv(root / src, dtype=str, keep_default_na=False)
    hit = df
    for k, v in row.items():
        hit = hit[hit[k] == v]
    if len(hit) != 1:
        raise KeyError(f"{src}: {len(hit)} rows match {row}")
    return Traced(str(hit.iloc[0][col]), src, {"row": row, "col": col})


def json_value(src: str, root: Path, keys: list) -> Traced:
    v = json.loads((root / src).read_text(encoding="utf-8"))
    for k in keys:
        v = v[k]
    return Traced(str(v), src, {"json": list(keys)})


def verdict_word(cell: str) -> str:
    """The verdict word a cell of table_claim_verdicts starts with ("-" where the claim is not judged)."""
    for w in sorted(WORDS + ("not judged",), key=len, reverse=True):
        if cell.startswith(w):
            return w
    return DASH


def count_word(src: str, root: Path, word: str) -> Traced:
    """How many verdict cells of table_claim_verdicts (family columns) carry ``word``."""
    df = pd.read_csv(root / src, dtype=str, keep_default_na=False)
    cols = [c for c in df.columns if c not in ("claim", "statement", "not judged in this run")]
    n = sum(verdict_word(df.at[i, c]) == word for i in df.index for c in cols)
    return Traced(str(n), src, {"count": word})


def resolve(src: str, loc: dict, root: Path) -> str:
    """The text a locator names, read again from its file (what :func:`untraced` compares with)."""
    if "row" in loc:
        return csv_cell(src, root, loc["row"], loc["col"]).text
    if "json" in loc:
        return json_value(src, root, loc["json"]).text
    if "count" in loc:
        return count_word(src, root, loc["count"]).text
    raise ValueError(f"unknown locator {loc}")


class _Spans(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.spans: list[list] = []
        self._open: list = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "span" and "data-src" in a:
            self._open.append([a["data-src"], json.loads(a["data-loc"]), ""])
        elif tag == "span":
            self._open.append(None)

    def handle_endtag(self, tag):
        if tag == "span" and self._open:
            s = self._open.pop()
            if s is not None:
                self.spans.append(s)

    def handle_data(self, data):
        for s in self._open:
            if s is not None:
                s[2] += data


def traced_spans(text: str) -> list[tuple[str, dict, str]]:
    p = _Spans()
    p.feed(text)
    return [tuple(s) for s in p.spans]


def untraced(article_html: str, root: Path) -> list[str]:
    """Every traced value of the article whose text is not what its source says now: one line each."""
    bad = []
    for src, loc, text in traced_spans(article_html):
        try:
            want = resolve(src, loc, root)
        except (OSError, KeyError, ValueError) as e:
            bad.append(f"{src} {json.dumps(loc)}: cannot be read ({e})")
            continue
        if want != text:
            bad.append(f"{src} {json.dumps(loc)}: the article says {text!r}, the file {want!r}")
    return bad


@dataclass
class Run:
    """Where a run's outputs are, relative to the working directory ``root``."""

    name: str
    root: Path = field(default_factory=Path)

    @property
    def tables(self) -> str:
        return f"paper_tables/{self.name}"

    @property
    def figures(self) -> str:
        return f"figures/{self.name}"

    @property
    def provenance(self) -> str:
        return f"results/{self.name}/provenance.json"


def families(run: Run) -> list[str]:
    """The trained families of table_claim_verdicts, in its column order."""
    df = pd.read_csv(run.root / run.tables / "table_claim_verdicts.csv", dtype=str, keep_default_na=False)
    return [c for c in df.columns if c not in ("claim", "statement", "synthetic layers", "not judged in this run")]


def abstract(run: Run) -> str:
    """One paragraph from the verdict table: how many verdict cells carry each word, over which families."""
    src = f"{run.tables}/table_claim_verdicts.csv"
    n = {w: count_word(src, run.root, w).html() for w in WORDS}
    fams = ", ".join(html.escape(f) for f in families(run))
    return (f"<p>Run {json_value(run.provenance, run.root, ['run']).html()}: of the paper's claims judged on "
            f"this run's trained models ({fams}) and on synthetic layers, {n['reproduced']} verdict(s) read "
            f"<em>reproduced</em>, {n['not reproduced']} <em>not reproduced</em> and {n['inconclusive']} "
            "<em>inconclusive</em> (paper.md section 4c: a verdict inside the Monte Carlo error or the rounding "
            "is inconclusive). The paper's full text is not available: each claim is compared with its statement "
            "in the spec (docs/paper.md), never with the paper's numbers. Random-weight twins are never evidence "
            "for a claim; they are shown beside the trained models as a control.</p>")


def verdict_table(run: Run) -> str:
    """table_claim_verdicts as the article shows it: every cell traced, coloured by its verdict word."""
    src = f"{run.tables}/table_claim_verdicts.csv"
    df = pd.read_csv(run.root / src, dtype=str, keep_default_na=False)
    cols = [c for c in df.columns if c != "statement"]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    rows = []
    for claim in df["claim"]:
        cells = []
        for c in cols:
            t = csv_cell(src, run.root, {"claim": claim}, c)
            cls = verdict_word(t.text).replace(" ", "-") if c != "claim" else ""
            cells.append(f'<td class="{cls}">{t.html()}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f'<div class="scroll"><table class="verdicts"><tr>{head}</tr>{"".join(rows)}</table></div>'


CLAIM_FIELDS = ("criterion", "measured", "null", "verdict", "failed part")


def claim_section(run: Run, claim: str, statement: Traced, figures: dict[str, str]) -> str:
    """One claim: its statement, then per trained family the criterion, the measurement, the null, the
    verdict and what failed (all from table_claims), the robustness line, and the figure that shows it."""
    src = f"{run.tables}/table_claims.csv"
    df = pd.read_csv(run.root / src, dtype=str, keep_default_na=False)
    parts = [f'<section id="{html.escape(claim)}"><h2>{html.escape(claim)}</h2>',
             f"<p class='statement'>{statement.html()}</p>"]
    rob = f"{run.tables}/table_robustness.csv"
    robust = pd.read_csv(run.root / rob, dtype=str, keep_default_na=False) if (run.root / rob).is_file() else None
    for fam in df.loc[df["claim"] == claim, "family"]:
        key = {"claim": claim, "family": fam}
        dl = "".join(f"<dt>{html.escape(f)}</dt><dd>{csv_cell(src, run.root, key, f).html()}</dd>"
                     for f in CLAIM_FIELDS)
        if robust is not None and ((robust["claim"] == claim) & (robust["family"] == fam)).sum() == 1:
            dl += f"<dt>robustness</dt><dd>{csv_cell(rob, run.root, key, 'agree').html()}</dd>"
        parts.append(f"<h3>{html.escape(fam)}</h3><dl>{dl}</dl>")
    for name in dict.fromkeys(f.strip().split(" ")[0] for f in df.loc[df["claim"] == claim, "figure"]):
        if name in figures:
            parts.append(f'<figure><img alt="{html.escape(name)}" src="{figures[name]}">'
                         f"<figcaption>{html.escape(name)} ({html.escape(run.figures)}/{html.escape(name)}.png)"
                         "</figcaption></figure>")
    parts.append("</section>")
    return "".join(parts)


def embedded_figures(run: Run) -> dict[str, str]:
    """Every trained-model figure of the run as a data URI (the article is one self-contained file)."""
    out = {}
    for p in sorted((run.root / run.figures).glob("fig_*.png")):
        if not p.stem.endswith("_twins"):
            out[p.stem] = "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode("ascii")
    return out


STYLE = """body{font:15px/1.5 system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:4px 6px;
vertical-align:top}td.reproduced{background:#e3f4e1}td.not-reproduced{background:#fbe4e4}td.inconclusive{
background:#fff1d6}dt{font-weight:600}dd{margin:0 0 .5em 1.5em}img{max-width:100%}figcaption{font-size:12px;
color:#555}.statement{font-style:italic}"""


def article_html(run: Run) -> str:
    """The whole article (title, provenance, abstract, verdict table, one section per claim)."""
    prov = run.provenance
    vsrc = f"{run.tables}/table_claim_verdicts.csv"
    verdicts = pd.read_csv(run.root / vsrc, dtype=str, keep_default_na=False)
    figs = embedded_figures(run)
    meta = (f"<p>Run {json_value(prov, run.root, ['run']).html()}, finished "
            f"{json_value(prov, run.root, ['end_time']).html()}; config sha256 "
            f"{json_value(prov, run.root, ['config_sha256']).html()}.</p>")
    sections = "".join(claim_section(run, c, csv_cell(vsrc, run.root, {"claim": c}, "statement"), figs)
                       for c in verdicts["claim"])
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Replication: Analogies between "
            f"Transformer Layers and Power Method</title><style>{STYLE}</style></head><body>"
            "<h1>Replication of “Analogies between Transformer Layers and Power Method” (Li &amp; Altafini, "
            f"arXiv 2605.25619)</h1>{meta}<h2>Abstract</h2>{abstract(run)}<h2>Verdicts</h2>{verdict_table(run)}"
            f"{sections}</body></html>")
