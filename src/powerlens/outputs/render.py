"""The replication article's blocks rendered twice from one source: a self-contained HTML file (figures as
palette-quantized PNG data URIs) and Typst markup for the PDF (data as Typst string literals, never markup).

Blocks: ("h", level, pieces[, anchor]), ("p", pieces[, css class]), ("table", header, rows[, css class]) with
rows of cells (pieces, css class[, colspan]), ("dl", [(term, pieces)]), ("glossary", [(id, term, pieces)]),
("figure", name, png path, caption, number), ("code", text), ("appendix",). A piece is template text (str, no
number of the run), a :class:`~powerlens.outputs.trace.Traced` value, ("s", css class, pieces): styled
text (class "line": a second, smaller line of a cell), or ("a", href, pieces): a link to a file beside the article
(HTML only; the PDF shows the words).

Every traced value is shown with its source a click away: a dotted underline, a title "file › field" on hover,
and a link to its entry in the sources appendix (file, field, value), which both renderings end with."""

from __future__ import annotations

import base64
import html
import io
import re
from pathlib import Path

from powerlens.outputs.trace import Traced

FILL = {"reproduced": "#e3f4e1", "not-reproduced": "#fbe4e4", "inconclusive": "#fff1d6", "underpowered": "#e4e9f4",
        "not-judged": "#f2f2f2"}
INK = {"reproduced": "#1b6e1b", "not-reproduced": "#a61b1b", "inconclusive": "#8a5a00", "underpowered": "#2c4a8a",
       "not-judged": "#555"}

STYLE = """body{font:15px/1.45 system-ui,sans-serif;max-width:1180px;margin:.6em auto;padding:0 1em;color:#222}
h1{font-size:19px;margin:.2em 0 .3em}h2{font-size:18px;margin:1.2em 0 .4em}h3{font-size:15px;margin:1em 0 .3em}
p.summary{font-size:15px;margin:.3em 0 .5em;max-width:1150px}p.small{font-size:12px;color:#555;margin:.2em 0}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 5px;
vertical-align:top;text-align:left}th{background:#f6f6f6}
table.verdicts{font-size:12.5px;line-height:1.3;width:100%;table-layout:fixed}table.verdicts td:first-child,
table.verdicts th:first-child{width:13em}table.compact{font-size:11.5px;line-height:1.25}
table.appendix{font-size:11px;line-height:1.2;width:100%}
table.appendix td:nth-child(2){width:45%}table.appendix td{padding:1px 4px}
""" + "".join(f"td.{k}{{background:{v}}}.w-{k}{{color:{INK[k]};font-weight:600}}" for k, v in FILL.items()) + """
.line{display:block;font-size:11px;color:#444}dl{display:grid;grid-template-columns:10em 1fr;gap:.15em .8em}
dt{font-weight:600}dd{margin:0}dl.glossary{grid-template-columns:13em 1fr}pre{background:#f4f4f4;padding:.5em;
overflow-x:auto;white-space:pre-wrap;word-break:break-all}
img{max-width:100%;max-height:780px;height:auto;width:auto;display:block}figure{margin:.8em 0}
figcaption{font-size:13px;color:#333;max-width:1100px}a.src{color:inherit;text-decoration:none}
a.src .t{text-decoration:underline dotted #888;text-underline-offset:2px}a.src:hover .t{background:#fff6bf}
a.g{color:inherit;text-decoration:underline dotted #36c}:target,.hit{background:#fff6bf}"""

#: The article's one script, a constant (no data of the run in it): a click on a link inside the article
#: (a source, a glossary term, a figure) scrolls to its target and marks it (class "hit", as ``:target``
#: would). Opened from the Snakemake report the article is a blob URL in a frame, where following a
#: ``#fragment`` link is refused ("Not allowed to load local resource"); opened as a file or over HTTP the
#: browser follows the link itself (history and ``:target`` as usual).
SCRIPT = """document.addEventListener('click', function (e) {
  var a = e.target.closest ? e.target.closest('a[href^="#"]') : null;
  if (!a) return;
  var el = document.getElementById(decodeURIComponent(a.getAttribute('href').slice(1)));
  if (!el) return;
  var old = document.querySelectorAll('.hit');
  for (var i = 0; i < old.length; i++) old[i].classList.remove('hit');
  el.classList.add('hit');
  if (/^(file|https?):$/.test(location.protocol)) return;
  e.preventDefault();
  el.scrollIntoView({block: 'center'});
});"""


class Glossary:
    """Links each glossary term at its first use in the template text (HTML only)."""

    def __init__(self, terms: list[tuple[str, str, list[str]]]):
        self.terms = terms  # (id, term, surface forms)
        self.seen: set[str] = set()
        forms = sorted(((f, gid) for gid, _, fs in terms for f in fs), key=lambda x: -len(x[0]))
        self.by_form = dict(forms)
        self.pattern = (re.compile("|".join(rf"(?<![\w]){re.escape(f)}(?![\w])" for f, _ in forms))
                        if forms else None)

    def link(self, text: str) -> str:
        if self.pattern is None:
            return html.escape(text)
        out, last = [], 0
        for m in self.pattern.finditer(text):
            gid = self.by_form[m.group(0)]
            if gid in self.seen:
                continue
            self.seen.add(gid)
            out += [html.escape(text[last:m.start()]), f'<a class="g" href="#{gid}">{html.escape(m.group(0))}</a>']
            last = m.end()
        return "".join(out) + html.escape(text[last:])


class _Html:
    def __init__(self, glossary: Glossary | None):
        self.glossary = glossary
        self.sources: dict[str, Traced] = {}  # appendix entries in order of first use

    def traced(self, t: Traced, cls: str = "") -> str:
        self.sources.setdefault(t.key, t)
        return f'<a class="src" href="#{t.key}">{t.html(cls)}</a>'

    def pieces(self, pieces, link: bool = True) -> str:
        out = []
        for p in pieces:
            if isinstance(p, Traced):
                out.append(self.traced(p))
            elif isinstance(p, tuple) and p and p[0] == "s":
                out.append(f'<span class="{html.escape(p[1])}">{self.pieces(p[2], link)}</span>')
            elif isinstance(p, tuple) and p and p[0] == "a":  # a link to a file beside the article (template)
                out.append(f'<a href="{html.escape(p[1])}">{self.pieces(p[2], False)}</a>')
            elif link and self.glossary is not None:
                out.append(self.glossary.link(p))
            else:
                out.append(html.escape(p))
        return "".join(out)

    def appendix(self) -> str:
        rows = "".join(f'<tr id="{t.key}"><td>{html.escape(t.src)}</td><td>{html.escape(t.field())}</td>'
                       f"<td>{html.escape(t.text)}</td></tr>" for t in self.sources.values())
        return ('<div class="scroll"><table class="appendix"><tr><th>file</th><th>field</th><th>value</th></tr>'
                f"{rows}</table></div>")


def png_for_html(path: Path, max_width: int = 1100, colors: int = 256) -> bytes:
    """A figure as a small PNG for the HTML: at most ``max_width`` px wide, quantized to a 256-colour palette by
    maximum coverage, no dithering (flat plot colours stay flat). Measured on the offline run's figures: about a
    third of the lossless size, every pixel within 34 (sum over R, G, B) of the original; median cut to 48
    colours, tried first, moved whole legend markers to another model's colour (error up to 143)."""
    from PIL import Image

    im = Image.open(path).convert("RGBA")
    if im.width > max_width:
        im = im.resize((max_width, round(im.height * max_width / im.width)), Image.LANCZOS)
    bg = Image.new("RGBA", im.size, (255, 255, 255, 255))
    im = Image.alpha_composite(bg, im).convert("RGB")
    q = im.quantize(colors=colors, method=Image.Quantize.MAXCOVERAGE, dither=Image.Dither.NONE)
    buf = io.BytesIO()
    q.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def _cell(c):
    return (c[0], c[1], c[2] if len(c) > 2 else 1)


def to_html(blocks: list, glossary: list | None = None, title: str = "Replication report") -> str:
    """The article as one self-contained HTML file (figures embedded as data URIs); ``glossary``: the terms
    linked at first use (None: the article's glossary, :mod:`powerlens.outputs.glossary`)."""
    if glossary is None:
        from powerlens.outputs.glossary import glossary_terms

        glossary = glossary_terms()
    r = _Html(Glossary(glossary))
    body = []
    for b in blocks:
        if b[0] == "h":
            anchor = f' id="{html.escape(b[3])}"' if len(b) > 3 and b[3] else ""
            body.append(f"<h{b[1]}{anchor}>{r.pieces(b[2], link=False)}</h{b[1]}>")
        elif b[0] == "p":
            cls = f' class="{b[2]}"' if len(b) > 2 and b[2] else ""
            body.append(f"<p{cls}>{r.pieces(b[1])}</p>")
        elif b[0] == "table":
            cls = f' class="{b[3]}"' if len(b) > 3 and b[3] else ""
            head = "".join(f"<th>{html.escape(c) if isinstance(c, str) else r.pieces(c)}</th>" for c in b[1])
            rows = "".join("<tr>" + "".join(
                f'<td class="{cls_}"{f" colspan={span}" if span > 1 else ""}>{r.pieces(p)}</td>'
                for p, cls_, span in map(_cell, row)) + "</tr>" for row in b[2])
            body.append(f'<div class="scroll"><table{cls}><tr>{head}</tr>{rows}</table></div>')
        elif b[0] == "code":
            body.append(f"<pre><code>{html.escape(b[1])}</code></pre>")
        elif b[0] == "dl":
            body.append("<dl>" + "".join(
                f"<dt>{html.escape(k) if isinstance(k, str) else r.pieces(k, link=False)}</dt><dd>{r.pieces(v)}</dd>"
                for k, v in b[1]) + "</dl>")
        elif b[0] == "glossary":
            body.append('<dl class="glossary">' + "".join(
                f'<dt id="{html.escape(gid)}">{html.escape(term)}</dt><dd>{r.pieces(v, link=False)}</dd>'
                for gid, term, v in b[1]) + "</dl>")
        elif b[0] == "figure":
            uri = "data:image/png;base64," + base64.b64encode(png_for_html(Path(b[2]))).decode("ascii")
            body.append(f'<figure id="figure-{b[4]}"><img alt="{html.escape(b[1])}" src="{uri}"><figcaption>'
                        f"<b>Figure {b[4]}:</b> {html.escape(b[3])}</figcaption></figure>")
        elif b[0] == "appendix":
            body.append("\0APPENDIX\0")
    text = "".join(body).replace("\0APPENDIX\0", r.appendix())
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>{text}"
            f'<script id="pl-links">{SCRIPT}</script></body></html>')


def typst_string(text: str) -> str:
    """Text as a Typst string literal: data is never markup (no #, *, _, $, [ or @ is read as syntax)."""
    return '#"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Typst:
    def __init__(self, links: bool):
        self.links = links  # whether the document has the appendix the values link to
        self.sources: dict[str, Traced] = {}

    def pieces(self, pieces) -> str:
        out = []
        for p in pieces:
            if isinstance(p, Traced):
                self.sources.setdefault(p.key, p)
                out.append(f"#src(<{p.key}>)[{typst_string(p.text)}]" if self.links else typst_string(p.text))
            elif isinstance(p, tuple) and p and p[0] == "a":  # a file beside the HTML: its words alone in the PDF
                out.append(self.pieces(p[2]))
            elif isinstance(p, tuple) and p and p[0] == "s":
                inner = self.pieces(p[2])
                if p[1] == "line":
                    out.append(f"#linebreak()#text(size: 7.5pt)[{inner}]")
                elif p[1].startswith("w-") and p[1][2:] in INK:
                    out.append(f'#text(fill: rgb("{INK[p[1][2:]]}"), weight: "bold")[{inner}]')
                else:
                    out.append(inner)
            else:
                out.append(typst_string(p))
        return "".join(out)

    def table(self, b) -> str:
        """A table whose header row repeats on every page (and column) it spans."""
        cls = b[3] if len(b) > 3 else ""
        size = {"verdicts": "8pt", "compact": "7pt", "appendix": "7pt"}.get(cls, "8.5pt")
        head = [f"[*{typst_string(c) if isinstance(c, str) else self.pieces(c)}*]" for c in b[1]]
        cells = [f"table.header({', '.join(head)})"]
        for row in b[2]:
            for p, cls_, span in map(_cell, row):
                opts = ([f'fill: rgb("{FILL[cls_]}")'] if cls_ in FILL else []) + (
                    [f"colspan: {span}"] if span > 1 else [])
                cells.append(f"table.cell({', '.join(opts)})[{self.pieces(p)}]" if opts else f"[{self.pieces(p)}]")
        return f"#text(size: {size})[#table(columns: {len(b[1])}, inset: 2.5pt, " + ", ".join(cells) + ")]"


#: The PDF's appendix cuts a long value here (the whole value is in the text and in the HTML's appendix).
CUT = 90

#: The PDF's settings: A4, numbered pages ("3 / 19"), a heading never alone at a page's foot (it keeps to the
#: block after it), and ``src``: a traced value as a link to its entry in the appendix (a dotted underline).
PREAMBLE = ('#set page(paper: "a4", margin: (x: 1.6cm, y: 1.7cm), numbering: "1 / 1")', "#set text(size: 9.5pt)",
            "#set par(justify: false)", "#show heading: set block(above: 1em, below: 0.5em, sticky: true)",
            "#show figure.caption: set text(size: 9pt)",
            "#let src(to, body) = link(to, underline(stroke: (paint: luma(150), thickness: 0.4pt, dash: \"dotted\"), "
            "offset: 1.6pt, evade: false, body))")


def short_field(t: Traced) -> str:
    """A source's field in few words for the PDF's appendix, under its file's name ("C1, BERT (trained) ›
    claim p"; the HTML's appendix has the full wording, :meth:`Traced.field`)."""
    loc, part = t.loc, " (part)" if t.loc.get("re") else ""
    if "row" in loc:
        return ", ".join(map(str, loc["row"].values())) + f" \u203a {loc['col']}" + part
    if "json" in loc:
        return " \u203a ".join(map(str, loc["json"])) + part
    if "count" in loc:
        also = f", control {loc['control']!r}" if loc.get("control") else ""
        return f"count of verdict cells {loc['count']!r}{also}"
    return t.field()


def appendix_typst(sources: dict[str, Traced]) -> str:
    """The sources appendix in two columns at 7 pt, grouped by file; each entry labelled with its key, the
    target of the values' links."""
    cells, last = [], None
    for t in sorted(sources.values(), key=lambda t: t.src):  # grouped by file, in order of use within one
        if t.src != last:
            cells.append(f"table.cell(colspan: 2, fill: luma(235))[*{typst_string(t.src)}*]")
            last = t.src
        value = t.text if len(t.text) <= CUT else t.text[:CUT] + "\u2026"
        cells += [f"[#metadata(none)<{t.key}>{typst_string(short_field(t))}]", f"[{typst_string(value)}]"]
    return ("#text(size: 7pt)[#columns(2, gutter: 8pt)[#table(columns: (1.15fr, 1fr), inset: 1.6pt, "
            "stroke: 0.3pt + luma(180), table.header([*field*], [*value*]), " + ", ".join(cells) + ")]]")


def to_typst(blocks: list, root: Path, glossary: list | None = None) -> str:
    """The same blocks as Typst markup (figures by path, relative to ``root``, Typst's project root)."""
    r = _Typst(links=any(b[0] == "appendix" for b in blocks))
    out = list(PREAMBLE)
    for b in blocks:
        if b[0] == "h":
            out.append("=" * b[1] + " " + r.pieces(b[2]))
        elif b[0] == "p":
            small = len(b) > 2 and b[2] == "small"
            out.append(f"#text(size: 8.5pt)[{r.pieces(b[1])}]" if small else r.pieces(b[1]))
        elif b[0] == "table":
            out.append(r.table(b))
        elif b[0] == "code":
            out.append("#text(size: 8pt)[#raw(" + typst_string(b[1])[1:] + ', block: true)]')
        elif b[0] == "dl":
            out += [f"/ {typst_string(k) if isinstance(k, str) else r.pieces(k)}: {r.pieces(v)}" for k, v in b[1]]
        elif b[0] == "glossary":
            out.append("#text(size: 9pt)[" + "\n\n".join(f"/ {typst_string(term)}: {r.pieces(v)}"
                                                       for _, term, v in b[1]) + "]")
        elif b[0] == "figure":
            rel = Path(b[2]).resolve().relative_to(root.resolve()).as_posix()
            out.append(f'#figure(image("/{rel}", width: 100%), caption: [{typst_string(b[3])}])')
        elif b[0] == "appendix":
            out.append("\0APPENDIX\0")
    return "\n\n".join(out).replace("\0APPENDIX\0", appendix_typst(r.sources)) + "\n"
