"""Write the replication article (results/<run>/replication.html and .pdf) from the run's tables, figures and
provenance: every number a traced value, read back before the files are written (:mod:`powerlens.outputs.article`)."""

from __future__ import annotations

from pathlib import Path

from powerlens.core.errors import PowerlensError
from powerlens.core.io import atomic_path, write_text
from powerlens.pipeline.options import Option

OPTIONS = (
    Option("run", "config:run", help="the run's name (its tables, figures and provenance are read from it)"),
    Option("out-html", "output:html", dest="out_html", help="replication.html to write"),
    Option("out-pdf", "output:pdf", dest="out_pdf", help="replication.pdf to write (Typst, no TeX)"),
    Option("index", "param:index", kind="json", help="JSON [{output, rule, log}]: the figures and tables with the "
           "rule and log behind each (from the workflow's rules)"),
    Option("command", "param:command", help="the command that rebuilds the run"),
)


def article(*, run: str, out_html: str | Path, out_pdf: str | Path, index: list[dict] | None = None,
            command: str = "") -> dict:
    import typst

    from powerlens.outputs.article import Run, document
    from powerlens.outputs.render import to_html, to_typst
    from powerlens.outputs.trace import traced_spans, untraced

    root = Path.cwd()
    blocks = document(Run(run, root), index=index or [], command=command)
    text = to_html(blocks)
    bad = untraced(text, root)
    if bad:  # a value the article would show is not what its file says: never written
        raise PowerlensError(f"the article's values do not match their files ({len(bad)}): {bad[0]}",
                             "report it: the article is built from the run's outputs alone")
    write_text(out_html, text)
    pdf = typst.compile(to_typst(blocks, root).encode("utf-8"), root=str(root))
    with atomic_path(out_pdf) as tmp:
        Path(tmp).write_bytes(pdf)
    return {"traced": len(traced_spans(text)), "html": str(out_html), "pdf": str(out_pdf)}


def show(result, kw: dict) -> None:
    print(f"replication article: {result['traced']} traced values, {result['html']}, {result['pdf']}")


STEP = article
