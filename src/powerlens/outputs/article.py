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


# The article is one list of blocks, rendered twice (HTML and Typst): ("h", level, pieces), ("p", pieces),
# ("table", header, rows of (pieces, css class)), ("dl", [(term, pieces)]), ("figure", name, png path).
# A piece is plain template text (str, no number of the run) or a Traced value.


def code_line(run: Run) -> list:
    """The code revision as provenance.json records it (commit, and whether it had uncommitted changes)."""
    prov = json.loads((run.root / run.provenance).read_text(encoding="utf-8"))
    code = prov.get("code") or {}
    if not code.get("commit"):
        return ["powerlens ", json_value(run.provenance, run.root, ["versions", "powerlens"]), " (no git checkout)"]
    return ["commit ", json_value(run.provenance, run.root, ["code", "commit"]),
            " (uncommitted changes: ", json_value(run.provenance, run.root, ["code", "uncommitted_changes"]), ")"]


def abstract(run: Run) -> list:
    """One paragraph from the verdict table: how many verdict cells carry each word, over which families."""
    src = f"{run.tables}/table_claim_verdicts.csv"
    n = {w: count_word(src, run.root, w) for w in WORDS}
    fams = families(run)
    judged = (f"the trained families of this run ({'; '.join(fams)})" if fams else
              "no trained model (this run has random-weight twins only, which are never evidence)")
    return [("p", ["Run ", json_value(run.provenance, run.root, ["run"]), ": over the paper's claims judged on "
                   f"{judged} and on synthetic layers, ",
                   n["reproduced"], " verdict cells read reproduced, ", n["not reproduced"], " not reproduced and ",
                   n["inconclusive"], " inconclusive (docs/paper.md section 4c: a verdict inside the Monte Carlo "
                   "error or the rounding is inconclusive). The paper's full text is not available: each claim is "
                   "compared with its statement in the spec, never with the paper's numbers. Random-weight twins "
                   "are never evidence for a claim; they appear beside the trained models as a control."])]


def verdict_table(run: Run) -> list:
    """table_claim_verdicts, every cell traced and classed by its verdict word."""
    src = f"{run.tables}/table_claim_verdicts.csv"
    df = pd.read_csv(run.root / src, dtype=str, keep_default_na=False)
    cols = [c for c in df.columns if c != "statement"]
    rows = []
    for claim in df["claim"]:
        row = []
        for c in cols:
            t = csv_cell(src, run.root, {"claim": claim}, c)
            row.append(([t], verdict_word(t.text).replace(" ", "-") if c != "claim" else ""))
        rows.append(row)
    return [("table", cols, rows)]


CLAIM_FIELDS = ("criterion", "measured", "null", "verdict", "failed part")


def claim_blocks(run: Run, claim: str, statement: Traced, figures: dict[str, Path]) -> list:
    """One claim: its statement, then per trained family the criterion, the measurement, the null, the
    verdict and what failed (table_claims), the robustness count (table_robustness), and its figures."""
    src, rob = f"{run.tables}/table_claims.csv", f"{run.tables}/table_robustness.csv"
    df = pd.read_csv(run.root / src, dtype=str, keep_default_na=False)
    robust = pd.read_csv(run.root / rob, dtype=str, keep_default_na=False) if (run.root / rob).is_file() else None
    out = [("h", 2, [claim]), ("p", [statement])]
    for fam in df.loc[df["claim"] == claim, "family"]:
        key = {"claim": claim, "family": fam}
        items = [(f, [csv_cell(src, run.root, key, f)]) for f in CLAIM_FIELDS]
        if robust is not None and ((robust["claim"] == claim) & (robust["family"] == fam)).sum() == 1:
            items.append(("robustness", [csv_cell(rob, run.root, key, "agree")]))
        out += [("h", 3, [fam]), ("dl", items)]
    for name in dict.fromkeys(f.split(",")[0].split(" ")[0] for f in df.loc[df["claim"] == claim, "figure"]):
        if name in figures:
            out.append(("figure", name, figures[name]))
    return out


def trained_figures(run: Run) -> dict[str, Path]:
    """The run's trained-model figures (PNG), by name (the twins' copies left out)."""
    return {p.stem: p for p in sorted((run.root / run.figures).glob("fig_*.png")) if not p.stem.endswith("_twins")}


def document(run: Run) -> list:
    """The article's blocks, in the order a referee reads."""
    prov, vsrc = run.provenance, f"{run.tables}/table_claim_verdicts.csv"
    verdicts = pd.read_csv(run.root / vsrc, dtype=str, keep_default_na=False)
    figs = trained_figures(run)
    blocks = [("h", 1, ["Replication of \u201cAnalogies between Transformer Layers and Power Method\u201d "
                        "(Li & Altafini, arXiv 2605.25619)"]),
              ("p", ["Run ", json_value(prov, run.root, ["run"]), ", finished ",
                     json_value(prov, run.root, ["end_time"]), "; config sha256 ",
                     json_value(prov, run.root, ["config_sha256"]), "; code ", *code_line(run), "."]),
              ("h", 2, ["Abstract"]), *abstract(run), ("h", 2, ["Verdicts"]), *verdict_table(run)]
    for c in verdicts["claim"]:
        blocks += claim_blocks(run, c, csv_cell(vsrc, run.root, {"claim": c}, "statement"), figs)
    return blocks + METHODS + reproducibility(run)


#: Methods, limitations and what goes beyond the paper, in brief: template text, no number of the run.
METHODS = [
    ("h", 2, ["Methods in brief"]),
    ("p", ["Each layer's F_t = W_O W_V is extracted from the checkpoint and proven by rebuilding the real attention "
           "module's output from the extracted matrices (float32 and float64). Eigenvalues come from float64 "
           "eigen-solves on the CPU, sorted by modulus, eigenvectors with a canonical phase. Token dynamics are "
           "measured in the real forward pass and in the attention-only law (the FFN removed, as the paper's "
           "reading does). Every per-layer statistic is tested against two nulls: random subspaces of the lead's "
           "dimension (a seeded Monte Carlo stream, extended where its 99% interval straddles alpha) and F's other "
           "eigen-directions; Holm's correction over layers. Steering edits the last layer's output matrix by a "
           "rank-1 term and compares it with activation addition at a matched norm of change."]),
    ("h", 2, ["Limitations"]),
    ("p", ["The paper's full text is not available: the claims are those of the spec (docs/paper.md), and where it "
           "says our choice, the choice is ours. The decoders of the offline run are 4-bit quantized checkpoints "
           "(their sensitivity to quantization is measured on MiniLM). Families with no trained checkpoint in a "
           "run (ALBERT, GPT-2, GPT-Neo offline) are stood in for by random-weight twins, which test the code, "
           "never a claim."]),
    ("h", 2, ["Beyond the paper"]),
    ("p", ["Two nulls per test, Monte Carlo error carried through Holm, C4 decided by linearisation at "
           "Newton-refined equilibria, C10 on the real forward pass split at the sublayers, and the verdicts "
           "rerun under other seeds, corpus thirds and quantizations (table_robustness)."]),
]


def reproducibility(run: Run) -> list:
    """Software versions and the BLAS of the run, each traced to provenance.json."""
    prov = json.loads((run.root / run.provenance).read_text(encoding="utf-8"))
    rows = [[([k], ""), ([json_value(run.provenance, run.root, ["versions", k])], "")]
            for k in sorted(prov.get("versions", {}))]
    blas = [[([f"BLAS {i}"], ""), ([json_value(run.provenance, run.root, ["blas", i, "internal_api"]), " ",
                                    json_value(run.provenance, run.root, ["blas", i, "version"]), " on ",
                                    json_value(run.provenance, run.root, ["blas", i, "architecture"])], "")]
            for i in range(len(prov.get("blas", [])))]
    return [("h", 2, ["Reproducibility"]),
            ("p", ["Every output of this run is rebuilt by the workflow from the config whose sha256 is given "
                   "above (snakemake --configfile with the run's config files); the run's provenance.json records "
                   "each model's revision and weight sha256, the seeds and the thread counts."]),
            ("table", ["software", "version"], rows + blas)]


def _html_pieces(pieces) -> str:
    return "".join(p.html() if isinstance(p, Traced) else html.escape(p) for p in pieces)


STYLE = """body{font:15px/1.5 system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:4px 6px;
vertical-align:top}td.reproduced{background:#e3f4e1}td.not-reproduced{background:#fbe4e4}td.inconclusive{
background:#fff1d6}dt{font-weight:600}dd{margin:0 0 .5em 1.5em}img{max-width:100%}figcaption{font-size:12px;
color:#555}"""


def to_html(blocks: list) -> str:
    """The article as one self-contained HTML file (figures embedded as data URIs)."""
    body = []
    for b in blocks:
        if b[0] == "h":
            body.append(f"<h{b[1]}>{_html_pieces(b[2])}</h{b[1]}>")
        elif b[0] == "p":
            body.append(f"<p>{_html_pieces(b[1])}</p>")
        elif b[0] == "table":
            head = "".join(f"<th>{html.escape(c)}</th>" for c in b[1])
            rows = "".join("<tr>" + "".join(f'<td class="{cls}">{_html_pieces(p)}</td>' for p, cls in r) + "</tr>"
                           for r in b[2])
            body.append(f'<div class="scroll"><table><tr>{head}</tr>{rows}</table></div>')
        elif b[0] == "dl":
            body.append("<dl>" + "".join(f"<dt>{html.escape(k)}</dt><dd>{_html_pieces(v)}</dd>" for k, v in b[1])
                        + "</dl>")
        elif b[0] == "figure":
            uri = "data:image/png;base64," + base64.b64encode(Path(b[2]).read_bytes()).decode("ascii")
            body.append(f'<figure><img alt="{html.escape(b[1])}" src="{uri}"><figcaption>{html.escape(b[1])}'
                        "</figcaption></figure>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Replication report</title>"
            f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>")


def typst_string(text: str) -> str:
    """Text as a Typst string literal: data is never markup (no #, *, _, $, [ or @ is read as syntax)."""
    return '#"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _typ_pieces(pieces) -> str:
    return "".join(typst_string(p.text if isinstance(p, Traced) else p) for p in pieces)


def to_typst(blocks: list, root: Path) -> str:
    """The same blocks as Typst markup (figures by path, relative to ``root``, Typst's project root)."""
    out = ['#set page(paper: "a4", margin: 1.8cm)', "#set text(size: 9pt)", "#set par(justify: false)"]
    for b in blocks:
        if b[0] == "h":
            out.append("=" * b[1] + " " + _typ_pieces(b[2]))
        elif b[0] == "p":
            out.append(_typ_pieces(b[1]))
        elif b[0] == "table":
            fill = {"reproduced": "rgb(\"#e3f4e1\")", "not-reproduced": "rgb(\"#fbe4e4\")",
                    "inconclusive": "rgb(\"#fff1d6\")"}
            cells = [f"[*{_typ_pieces([c])}*]" for c in b[1]]
            for r in b[2]:
                cells += [f"table.cell(fill: {fill[cls]})[{_typ_pieces(p)}]" if cls in fill
                          else f"[{_typ_pieces(p)}]" for p, cls in r]
            out.append(f"#table(columns: {len(b[1])}, inset: 3pt, " + ", ".join(cells) + ")")
        elif b[0] == "dl":
            out += [f"/ {_typ_pieces([k])}: {_typ_pieces(v)}" for k, v in b[1]]
        elif b[0] == "figure":
            rel = Path(b[2]).resolve().relative_to(root.resolve()).as_posix()
            out.append(f'#figure(image("/{rel}", width: 100%), caption: {typst_string(b[1])[1:]})')
    return "\n\n".join(out) + "\n"
