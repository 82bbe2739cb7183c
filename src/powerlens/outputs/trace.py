"""Traced values: every number and verdict the replication article shows is written as
``<span class="t" data-src="<file>" data-loc="<locator>">text</span>``, where the file is an output of the
run (relative to the working directory) and the locator names the field (a CSV row by its key columns and a
column, a JSON path, or a count over a table's cells). :func:`untraced` reads every such span back from the
written HTML and compares it with its source."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd

#: The verdict words (paper.md section 4c) in the order the abstract counts them.
WORDS = ("reproduced", "not reproduced", "inconclusive", "underpowered")
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


CONTROL_SUFFIX = ": matched control (random layer weights)"  # a matched control's column in table_claim_verdicts


def verdict_columns(df: pd.DataFrame) -> list[str]:
    """The verdict columns of table_claim_verdicts: the trained families and the synthetic layers, never a
    matched control's column (random weights: not a verdict) or the claim's own columns."""
    return [c for c in df.columns if c not in ("claim", "statement", "not judged in this run")
            and not c.endswith(CONTROL_SUFFIX)]


def count_word(src: str, root: Path, word: str) -> Traced:
    """How many verdict cells of table_claim_verdicts (family and synthetic columns, never a matched control's)
    carry ``word``."""
    df = pd.read_csv(root / src, dtype=str, keep_default_na=False)
    cols = verdict_columns(df)
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


