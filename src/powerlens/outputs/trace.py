"""Traced values: every number and verdict the replication article shows is written as
``<span class="t" data-src="<file>" data-loc="<locator>" title="<file> › <field>">text</span>``, where the file is
an output of the run (relative to the working directory) and the locator names the field (a CSV row by its key
columns and a column, a JSON or YAML path, a count over a table's cells or rows; ``re`` keeps the part of the
field its first group matches). :func:`untraced` reads every such span back from the written HTML and compares it
with its source."""

from __future__ import annotations

import hashlib
import html
import json
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd

#: The verdict words (paper.md section 4c) in the order the abstract counts them.
WORDS = ("reproduced", "not reproduced", "inconclusive", "underpowered")


def read_table(path, nrows: int | None = None) -> pd.DataFrame:
    """One of the run's table CSVs as text, as a reader sees it: every cell and header a string, no value read as
    missing, the spreadsheet formula guard undone (:func:`powerlens.core.fmt.csv_untext`). Every reader of the
    article's tables goes through it, the read-back included."""
    from powerlens.core.fmt import csv_untext

    df = pd.read_csv(path, dtype=str, keep_default_na=False, nrows=nrows)
    df = df.rename(columns=csv_untext)
    for c in df.columns:
        df[c] = df[c].map(csv_untext)
    return df


@dataclass
class Traced:
    """A value shown to the reader and where it comes from."""

    text: str
    src: str  # an output file, relative to the run's working directory
    loc: dict  # {"row": {col: value, ...}, "col": name} | {"json": [keys]} | {"count": word} | {"rows": ...}

    @property
    def key(self) -> str:
        """The appendix entry's id: the same file and field always get the same one."""
        return "src-" + hashlib.sha1(f"{self.src}\0{json.dumps(self.loc, sort_keys=True)}".encode()).hexdigest()[:10]

    def field(self) -> str:
        return describe(self.loc)

    def title(self) -> str:
        return f"{self.src} \u203a {self.field()}"

    def html(self, cls: str = "") -> str:
        loc = json.dumps(self.loc, sort_keys=True, separators=(",", ":"))
        loc = html.escape(loc, quote=False).replace("'", "&#x27;")  # the attribute is single-quoted
        return (f'<span class="t{" " + cls if cls else ""}" data-src="{html.escape(self.src)}" '
                f"data-loc='{loc}' title=\"{html.escape(self.title())}\">{html.escape(self.text)}</span>")


def describe(loc: dict) -> str:
    """A locator in words ("row claim=C1, family=BERT › column claim p")."""
    part = " (the part shown)" if loc.get("re") else ""
    if "row" in loc:
        return "row " + ", ".join(f"{k}={v}" for k, v in loc["row"].items()) + f" \u203a column {loc['col']}" + part
    if "json" in loc:
        return " \u203a ".join(map(str, loc["json"])) + part
    if "count" in loc:
        also = f" and whose matched control's is {loc['control']!r}" if loc.get("control") else ""
        return f"number of verdict cells (rows) whose outcome is {loc['count']!r}{also}"
    if "rows" in loc:
        r = loc["rows"]
        cond = [f"{c} is one of {', '.join(p)}" if isinstance(p, list) else f"{c} matches {p!r}"
                for c, p in r.get("where", [])]
        if r.get("below"):
            cond.append(f"{r['below'][0]} below {r['below'][1]}")
        return "number of rows" + (" where " + " and ".join(cond) if cond else "")
    return json.dumps(loc)


def _part(text: str, pattern: str | None) -> str:
    if not pattern:
        return text
    m = re.search(pattern, text)
    if not m:
        raise KeyError(f"{pattern!r} does not match {text!r}")
    return m.group(1)


def csv_cell(src: str, root: Path, row: dict, col: str, part: str | None = None) -> Traced:
    """The cell of ``col`` in the one row of the CSV ``src`` whose key columns equal ``row`` (``part``: a regex
    whose first group is the part of the cell shown)."""
    df = read_table(root / src)
    hit = df
    for k, v in row.items():
        hit = hit[hit[k] == v]
    if len(hit) != 1:
        raise KeyError(f"{src}: {len(hit)} rows match {row}")
    loc = {"row": row, "col": col, **({"re": part} if part else {})}
    return Traced(_part(str(hit.iloc[0][col]), part), src, loc)


def json_value(src: str, root: Path, keys: list, part: str | None = None) -> Traced:
    """The value at ``keys`` of a JSON file (or a YAML file, by its suffix)."""
    text = (root / src).read_text(encoding="utf-8")
    if src.endswith((".yaml", ".yml")):
        import yaml

        v = yaml.safe_load(text)
    else:
        v = json.loads(text)
    for k in keys:
        v = v[k]
    loc = {"json": list(keys), **({"re": part} if part else {})}
    return Traced(_part(str(v), part), src, loc)


def row_count(src: str, root: Path, where: list | None = None, below: list | None = None) -> Traced:
    """How many rows of the CSV ``src`` match every ``[column, regex]`` of ``where`` and, with ``below``
    ``[column, x]``, hold a number below x in that column."""
    df = read_table(root / src)
    keep = pd.Series(True, index=df.index)
    for c, p in where or []:  # a list: one of its values; a string: a regular expression (a label, never a verdict)
        keep &= df[c].isin(p) if isinstance(p, list) else df[c].map(lambda v: re.search(p, v) is not None)
    if below:
        keep &= pd.to_numeric(df[below[0]], errors="coerce").lt(float(below[1])).fillna(False)
    return Traced(str(int(keep.sum())), src, {"rows": {"where": [list(w) for w in where or []],
                                                       **({"below": list(below)} if below else {})}})



CONTROL_SUFFIX = ": matched control (random attention weights)"  # a matched control's column in table_claim_verdicts


def verdict_columns(df: pd.DataFrame) -> list[str]:
    """The verdict columns of table_claim_verdicts: the trained families and the synthetic layers, never a
    matched control's column (random weights: not a verdict) or the claim's own columns."""
    return [c for c in df.columns if c not in ("claim", "statement", "not judged in this run")
            and not c.endswith(CONTROL_SUFFIX)]


def has_controls(src: str, root: Path) -> bool:
    """Did the run judge matched controls (a control column in table_claim_verdicts)? With
    ``matched_controls: false`` there is none, and no sentence may speak of them."""
    cols = read_table(root / src, nrows=0).columns
    return any(str(c).endswith(CONTROL_SUFFIX) for c in cols)


#: count_word's ``control``: the cells whose matched controls pass in every seed (revision 6: several seeds), and the
#: cells that have matched controls at all
EVERY_SEED, CONTROLLED = "every seed", "controlled"


def count_word(src: str, root: Path, word: str, control: str | None = None) -> Traced:
    """How many rows of table_claims (trained families and the synthetic layers: the verdict cells) have the
    outcome ``word`` (with ``control`` :data:`EVERY_SEED`: and whose matched controls pass in every seed;
    :data:`CONTROLLED`: and that have matched controls)."""
    df = read_table(root / src)
    keep = df["outcome"] == word
    if control is not None:
        if control not in (EVERY_SEED, CONTROLLED):
            raise ValueError(f"count_word: unknown control filter {control!r}")
        k, n = (pd.to_numeric(df.get(c, pd.Series(np.nan, index=df.index)), errors="coerce")
                for c in ("control seeds passing", "control seeds"))
        keep &= (n > 0) & ((k == n) if control == EVERY_SEED else True)
    return Traced(str(int(keep.sum())), src, {"count": word, **({"control": control} if control else {})})


def resolve(src: str, loc: dict, root: Path) -> str:
    """The text a locator names, read again from its file (what :func:`untraced` compares with)."""
    if "row" in loc:
        return csv_cell(src, root, loc["row"], loc["col"], loc.get("re")).text
    if "json" in loc:
        return json_value(src, root, loc["json"], loc.get("re")).text
    if "count" in loc:
        return count_word(src, root, loc["count"], loc.get("control")).text
    if "rows" in loc:
        return row_count(src, root, loc["rows"].get("where"), loc["rows"].get("below")).text
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
        except (OSError, KeyError, ValueError, TypeError, IndexError) as e:
            bad.append(f"{src} {json.dumps(loc)}: cannot be read ({e})")
            continue
        if want != text:
            bad.append(f"{src} {json.dumps(loc)}: the article says {text!r}, the file {want!r}")
    return bad


