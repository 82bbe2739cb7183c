"""Write the replication article (results/<run>/replication.html and .pdf) from the run's tables, figures and
provenance: every number a traced value, read back before the files are written (:mod:`powerlens.outputs.article`).

The two files are one pair: both carry the same stamp (:func:`pair_stamps` reads it back) and are renamed into
place together at the end (:func:`powerlens.outputs.staging.staged`). Nothing is written before every input
was checked, so a refused or failed article leaves the previous one as it was; the rule flags both outputs
``update()`` so that Snakemake, too, neither deletes them before the job nor after a failure."""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from pathlib import Path

from powerlens.core.errors import PowerlensError
from powerlens.core.io import atomic_path, read_generated_json, reading_generated, write_text
from powerlens.pipeline.options import Option

OPTIONS = (
    Option("run", "config:run", help="the run's name (its tables, figures and provenance are read from it)"),
    Option("out-html", "output:html", dest="out_html", help="replication.html to write"),
    Option("out-pdf", "output:pdf", dest="out_pdf", help="replication.pdf to write (Typst, no TeX)"),
    Option("index", "param:index", kind="json", help="JSON [{output, rule, log}]: the figures and tables with the "
           "rule and log behind each (from the workflow's rules)"),
    Option("command", "param:command", help="the command that rebuilds the run"),
    Option("paper-config", "input:paper_config", dest="paper_config", help="the paper config (config/config.yaml: "
           "the paper's models and their pinned revisions), for the stand-in table"),
)

TITLE = "Replication of Li & Altafini, Analogies between Transformer Layers and Power Method"
STAMP = "powerlens-article"  # the HTML's <meta name> and the PDF's keyword prefix
_PDF_STAMP = re.compile(rb"powerlens-article ([0-9a-f]{16})")
_HTML_STAMP = re.compile(r'<meta name="powerlens-article" content="([0-9a-f]{16})">')

#: The CSVs the article reads: path under the run's tables, the step that writes it, the columns it needs,
#: and whether the file may be absent.
TABLES = (("table_claim_verdicts.csv", "claims", ("claim", "statement"), False),
          ("table_claims.csv", "claims", ("claim", "family", "verdict", "figure"), False),
          ("table_robustness.csv", "claims", ("claim", "family"), True),
          ("table_speed.csv", "speed", ("model", "step"), True))


def article(*, run: str, out_html: str | Path, out_pdf: str | Path, index: list[dict] | None = None,
            command: str = "", paper_config: str | None = None) -> dict:
    import typst

    from powerlens.outputs.article import Run, check_table_records, document
    from powerlens.outputs.glossary import dangling
    from powerlens.outputs.render import to_html, to_typst
    from powerlens.outputs.staging import staged
    from powerlens.outputs.trace import traced_spans, untraced

    root = Path.cwd()
    r = Run(run, root, paper_config=_paper_config(root, paper_config))
    check_inputs(r)
    check_table_records(r)
    blocks = document(r, index=index or [], command=command)
    text = to_html(blocks, title=TITLE)
    bad = untraced(text, root)
    if bad:  # a value the article would show is not what its file says: never written
        raise PowerlensError(f"the article's values do not match their files ({len(bad)}): {bad[0]}",
                             "report it: the article is built from the run's outputs alone")
    refs = dangling(text)
    if refs:  # a section, figure or table the article names but lacks
        raise PowerlensError(f"the article names what it does not contain ({len(refs)}): {refs[0]}",
                             "report it: the article's template text is ours to fix")
    stamp = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    with tempfile.TemporaryDirectory() as tmp:
        typ = f'#set document(keywords: ("{STAMP} {stamp}",))\n' + to_typst(_figures_in(blocks, r, Path(tmp)),
                                                                           Path(tmp))
        try:
            pdf = typst.compile(typ.encode("utf-8"), root=tmp)
        except typst.TypstError as e:  # the inputs were checked above: what is left is ours to fix
            raise PowerlensError(f"the article's PDF could not be typeset: {str(e).splitlines()[0][:300]}",
                                 "report it with the run's logs; the previous article was kept") from None
    with staged({"html": out_html, "pdf": out_pdf}) as s:  # both renamed together, after both are written
        write_text(s["html"], _stamped(text, stamp))
        with atomic_path(s["pdf"]) as tmp_pdf:
            Path(tmp_pdf).write_bytes(pdf)
    return {"traced": len(traced_spans(text)), "html": str(out_html), "pdf": str(out_pdf), "stamp": stamp}


def _paper_config(root: Path, given: str | None = None) -> str | None:
    """The paper config (config/config.yaml, the paper's models pinned): the one given (the rule's input), else
    the one under the working directory when the run is in the repository, else the repository's own (an
    absolute path), else None."""
    if given:
        if not (root / given).is_file():
            raise PowerlensError(f"the paper config {given} does not exist",
                                 "give --paper-config the repository's config/config.yaml")
        return given
    if (root / "config/config.yaml").is_file():
        return "config/config.yaml"
    repo = Path(__file__).resolve().parents[4] / "config/config.yaml"
    return str(repo) if repo.is_file() else None


def check_inputs(run) -> None:
    """Every file the article reads, checked first, so a missing run, an empty or truncated table and a
    truncated provenance.json each get a message naming the file and the step that rebuilds it."""
    import pandas as pd

    first = run.root / run.tables / TABLES[0][0]
    if not first.is_file():
        have = sorted(p.parent.name for p in (run.root / "paper_tables").glob("*/table_claim_verdicts.csv"))
        raise PowerlensError(f"run {run.name!r} has no claims table here ({run.tables}/{TABLES[0][0]} does not "
                             f"exist under {run.root}): the run has not reached its claims step, or its name is "
                             "not the config's `run:`",
                             "run the pipeline for it first (`snakemake --cores N --configfile <its config>`), or "
                             "give --run the name of a finished run" + (f" (here: {', '.join(have)})" if have else ""))
    for name, rule, cols, optional in TABLES:
        path = run.root / run.tables / name
        if optional and not path.is_file():
            continue
        fix = (f"rebuild it: run the same snakemake command with `--forcerun {rule}` added (it is a generated "
               "file; deleting it also makes the pipeline write it again)")
        if not path.is_file():
            raise PowerlensError(f"{run.tables}/{name} (written by the {rule} step) does not exist", fix)
        with reading_generated(path, rule):
            df = pd.read_csv(path, dtype=str, keep_default_na=False)
        gone = [c for c in cols if c not in df.columns]
        if gone or not len(df):
            raise PowerlensError(f"{run.tables}/{name} (written by the {rule} step) "
                                 + (f"lacks the column(s) {', '.join(gone)}" if gone else "has no rows"), fix)
    prov = run.root / run.provenance
    if not prov.is_file():
        raise PowerlensError(f"{run.provenance} (written by the provenance step) does not exist",
                             "rebuild it: run the same snakemake command with `--forcerun provenance` added")
    doc = read_generated_json(prov, "provenance")
    if not isinstance(doc, dict) or "run" not in doc:
        raise PowerlensError(f"{run.provenance} is not a provenance record (no `run` in it)",
                             "rebuild it: run the same snakemake command with `--forcerun provenance` added")


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def check_png(path: Path) -> None:
    """A figure the article embeds is a PNG (its 8-byte signature) and not empty: a figure overwritten by other
    bytes would otherwise end the PDF's typesetting in a traceback ("failed to decode image")."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(PNG_SIGNATURE))
    except OSError as e:
        raise PowerlensError(f"figure {path} cannot be read ({e.strerror})",
                             "run the same snakemake command again (the plot step that writes it runs again)") from None
    if head != PNG_SIGNATURE:
        raise PowerlensError(f"{path} is not a PNG image (it starts with {head[:8]!r}): a figure overwritten or "
                             "cut short after its plot step wrote it",
                             f"rebuild it: delete {path} and run the same snakemake command (the plot step that "
                             "writes it runs again)")


def _figures_in(blocks: list, run, folder: Path) -> list:
    """The blocks with each figure copied into ``folder`` (Typst's root for the PDF) at the path it has under
    the run's root (figures/<run>/<name>.png): a figures folder that is a link to elsewhere, or figures on
    another disk, then compile like any other."""
    out = []
    for b in blocks:
        if b[0] == "figure":
            check_png(Path(b[2]))
            dest = folder / run.figures / Path(b[2]).name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(b[2], dest)
            b = (b[0], b[1], dest, *b[3:])
        out.append(b)
    return out


def _stamped(text: str, stamp: str) -> str:
    """The HTML with its pair stamp in the head (the PDF carries the same one as a keyword)."""
    return text.replace("<meta charset='utf-8'>", f"<meta charset='utf-8'><meta name=\"{STAMP}\" content=\"{stamp}\">",
                        1)


def pair_stamps(html_path: str | Path, pdf_path: str | Path) -> tuple[str | None, str | None]:
    """The stamps of an article's HTML and PDF (None where a file has none): equal when the two files were
    written by the same run of this step."""
    h = _HTML_STAMP.search(Path(html_path).read_text(encoding="utf-8", errors="replace"))
    p = _PDF_STAMP.search(Path(pdf_path).read_bytes())
    return (h.group(1) if h else None, p.group(1).decode("ascii") if p else None)


def show(result, kw: dict) -> None:
    print(f"replication article: {result['traced']} traced values, {result['html']}, {result['pdf']} "
          f"(pair stamp {result['stamp']})")


STEP = article
