"""The report's front page: the verdict table and the article's links, read from the run's files.

Snakemake renders the front page (workflow/report/workflow.rst) with Jinja given only ``snakemake.config``,
then docutils. In report mode only (``snakemake --report``, after the freshness check has passed and after
every rule is defined, so no job's params see it) the Snakefile puts :func:`front_page` under the reserved
config key :data:`KEY` (the schema refuses that key in a user's config, so only this module fills it). Every
cell of the table is data (model labels come from the user's config): :func:`rst_text` makes it plain text
for reStructuredText, never a link, a role, a directive, a substitution or a list.

The report shows a result in an iframe whose ``src`` is the file's data URI; Chromium does not navigate to a
URL over 2 MB (a blank pane, ``about:blank#blocked``). The front page's links to the article and its PDF turn
the data URI into a blob URL first (no such limit), and :func:`front_page` says which files are over the
limit, so the page can say that their entries in the result list open blank and name the files beside it.
"""

from __future__ import annotations

import csv
import mimetypes
import os
import re
import string
import unicodedata
from pathlib import Path

#: The config key the front page reads (reserved: the config schema allows no such key in a user's config).
KEY = "__powerlens_report_front__"
#: The longest URL Chromium navigates to (its url::kMaxURLChars); a longer data URI opens a blank pane.
URI_LIMIT = 2 * 1024 * 1024
#: The class of a verdict cell by its first words (the text itself is never a class name).
VERDICT_CLASSES = (("not reproduced", "pl-no"), ("reproduced", "pl-yes"), ("inconclusive", "pl-maybe"),
                   ("underpowered", "pl-weak"), ("no power", "pl-weak"))
#: The table's first columns when present: not verdicts.
TEXT_COLUMNS = ("claim", "statement")


def rst_text(value: object) -> str:
    """``value`` as reStructuredText that renders as exactly its own text on one line: every run of white
    space (newlines included) becomes one space, control characters go, and every ASCII punctuation character
    is backslash-escaped (so no inline markup, link, role, substitution, footnote, directive, list or table
    can start, and no URI or e-mail address is recognised as a link). An empty value is one no-break space
    (an empty cell: docutils reads a lone backslash as a too-short section adornment)."""
    text = "".join(ch for ch in str(value) if unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp")
                   or ch.isspace())
    text = " ".join(text.split())
    if not text:
        return "\u00a0"
    return "".join("\\" + ch if ch in string.punctuation else ch for ch in text)


def verdict_class(cell: str) -> str:
    """The CSS class of a verdict cell (``pl-na`` for a cell that is no verdict, e.g. "-")."""
    low = cell.strip().lower()
    return next((cls for start, cls in VERDICT_CLASSES if low.startswith(start)), "pl-na")


def data_uri_length(path: Path) -> int:
    """The length of the data URI Snakemake's report makes of ``path`` (snakemake.report.common.data_uri)."""
    mime = mimetypes.guess_type(str(path))[0] or "text/plain"
    head = f"data:{mime};charset=utf8;filename={path.name};base64,"
    return len(head) + 4 * ((path.stat().st_size + 2) // 3)


def embedded_file(path: Path) -> dict:
    """Whether the report can open ``path`` from its result list: its size in MB and whether its data URI is
    within :data:`URI_LIMIT`."""
    if not path.is_file():
        return {"path": str(path), "exists": False, "mb": "0", "fits": True}
    return {"path": str(path), "exists": True, "mb": f"{path.stat().st_size / 1e6:.2f}",
            "fits": data_uri_length(path) <= URI_LIMIT}


def family_models(claims_csv: Path) -> dict[str, str]:
    """Each family's models as table_claims' "models" column names them ({"BERT (trained)": "all-MiniLM-L6-v2
    (trained weights)"}; empty when the file is missing)."""
    from powerlens.core.fmt import csv_untext

    if not claims_csv.is_file():
        return {}
    with open(claims_csv, newline="", encoding="utf-8") as f:
        rows = [{csv_untext(k): csv_untext(v or "") for k, v in r.items()} for r in csv.DictReader(f)]
    return {r["family"]: r["models"] for r in reversed(rows) if r.get("models", "-") not in ("", "-")
            and r.get("family", "-") not in ("", "-")}


def column_head(name: str, models: dict[str, str]) -> dict:
    """A column's header: a family with its models named, a matched control's column marked as a control
    (class ``pl-control-head``; its cells ``pl-control``: random weights, never coloured as evidence)."""
    from powerlens.outputs.trace import CONTROL_SUFFIX

    if name.endswith(CONTROL_SUFFIX):
        fam = name[:-len(CONTROL_SUFFIX)]
        named = re.sub(r" \((?:trained|random)[^()]*\)", "", models.get(fam, ""))  # the names, not the weights
        text = f"matched control of {named} (random attention weights)" if named else name
        return {"text": rst_text(text), "cls": "pl-control-head"}
    return {"text": rst_text(f"{name}: {models[name]}" if name in models else name), "cls": ""}


def verdict_rows(csv_path: Path) -> dict:
    """The verdict table as rst-safe cells: ``header`` (column names), ``heads`` (``{"text", "cls"}``: the
    header as shown, models named, controls marked; :func:`column_head`), ``rows`` (each a list of
    ``{"text", "cls"}``), and the source file."""
    from powerlens.core.fmt import csv_untext

    with open(csv_path, newline="", encoding="utf-8") as f:
        table = [[csv_untext(c) for c in r] for r in csv.reader(f)]  # the text, not its spreadsheet guard
    if not table:
        return {"header": [], "rows": [], "source": str(csv_path)}
    head, body = table[0], [r for r in table[1:] if any(c.strip() for c in r)]
    width = len(head)

    def cell(i: int, value: str) -> dict:
        name = head[i] if i < width else ""
        cls = "pl-text" if name in TEXT_COLUMNS else verdict_class(value)
        return {"text": rst_text(value), "cls": "pl-control" if heads[i]["cls"] == "pl-control-head" else cls}

    models = family_models(csv_path.with_name("table_claims.csv"))
    heads = [column_head(h, models) for h in head]
    rows = [[cell(i, (r + [""] * width)[i]) for i in range(width)] for r in body]
    return {"header": [rst_text(h) for h in head], "heads": heads, "rows": rows, "source": str(csv_path),
            "widths": " ".join("3" if h == "statement" else "1" for h in head)}


def front_page(run: str, root: str | os.PathLike = ".") -> dict:
    """What workflow/report/workflow.rst shows above its text: the verdict table of
    paper_tables/<run>/table_claim_verdicts.csv (empty when the file is missing) and the article's HTML and
    PDF (size, and whether the report's result list can open them)."""
    root = Path(root)
    verdicts = root / "paper_tables" / run / "table_claim_verdicts.csv"
    table = verdict_rows(verdicts) if verdicts.is_file() else {"header": [], "rows": [], "source": str(verdicts)}
    table["source"] = f"paper_tables/{run}/table_claim_verdicts.csv"
    html, pdf = (embedded_file(root / "results" / run / f"replication.{x}") for x in ("html", "pdf"))
    html["path"], pdf["path"] = f"results/{run}/replication.html", f"results/{run}/replication.pdf"
    return {"verdicts": table, "article": html, "pdf": pdf, "limit_mb": f"{URI_LIMIT / 2**20:.0f}"}
