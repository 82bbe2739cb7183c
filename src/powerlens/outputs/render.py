"""The replication article's blocks rendered twice from one source: a self-contained HTML file (figures as
data URIs) and Typst markup for the PDF (data as Typst string literals, never markup)."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from powerlens.outputs.trace import Traced


def _html_pieces(pieces) -> str:
    return "".join(p.html() if isinstance(p, Traced) else html.escape(p) for p in pieces)


STYLE = """body{font:15px/1.5 system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:4px 6px;
vertical-align:top}td.reproduced{background:#e3f4e1}td.not-reproduced{background:#fbe4e4}td.inconclusive{
background:#fff1d6}td.underpowered{background:#e4e9f4}dl{display:grid;grid-template-columns:9em 1fr;gap:.2em
.8em}dt{font-weight:600}dd{margin:0}pre{background:#f4f4f4;padding:.5em;overflow-x:auto}img{max-width:100%}figcaption{font-size:12px;
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
        elif b[0] == "code":
            body.append(f"<pre><code>{html.escape(b[1])}</code></pre>")
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
                    "inconclusive": "rgb(\"#fff1d6\")", "underpowered": "rgb(\"#e4e9f4\")"}
            cells = [f"[*{_typ_pieces([c])}*]" for c in b[1]]
            for r in b[2]:
                cells += [f"table.cell(fill: {fill[cls]})[{_typ_pieces(p)}]" if cls in fill
                          else f"[{_typ_pieces(p)}]" for p, cls in r]
            out.append(f"#table(columns: {len(b[1])}, inset: 3pt, " + ", ".join(cells) + ")")
        elif b[0] == "code":
            out.append("#raw(" + typst_string(b[1])[1:] + ', block: true)')
        elif b[0] == "dl":
            out += [f"/ {_typ_pieces([k])}: {_typ_pieces(v)}" for k, v in b[1]]
        elif b[0] == "figure":
            rel = Path(b[2]).resolve().relative_to(root.resolve()).as_posix()
            out.append(f'#figure(image("/{rel}", width: 100%), caption: {typst_string(b[1])[1:]})')
    return "\n\n".join(out) + "\n"
