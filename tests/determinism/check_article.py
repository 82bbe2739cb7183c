"""The article of a finished run read as a reader first sees it (issue #67): replication.html opened in headless
Chromium at 1280x800, the text of the first screen only (what lies above the window's bottom at load) must name
each trained model of table_models, each of the paper's families that has no trained model in the run, the verdict
counts split by where the claims are judged (law, real forward pass, synthetic layers) and the pattern sentence;
the section "What the evidence says" must exist. The PDF (:func:`check_pdf`): a link annotation per traced value,
page numbers on every page, the verdict table's header row on every page it spans. Run by check_offline_twice.sh
on the offline run; each check was seen failing on a doctored article and PDF.
Usage: python tests/determinism/check_article.py <run folder> <run name>"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pandas as pd
import yaml


def first_screen(html: Path) -> dict:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(html.as_uri())
        seen = page.evaluate("""() => {
            const out = [];
            const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
            while (walk.nextNode()) {
                const n = walk.currentNode, r = document.createRange();
                r.selectNodeContents(n);
                const b = r.getBoundingClientRect();
                if (b.height > 0 && b.bottom <= 800) out.push(n.textContent);
            }
            return {text: out.join(''), evidence: !!document.getElementById('evidence')};
        }""")
        browser.close()
    return seen


def check_pdf(root: Path, run: str) -> list[str]:
    """replication.pdf: a link annotation for every traced value the HTML shows (each value of the PDF links to
    its source entry; a value wrapped over two lines gets two), "k / n" at the foot of every page, and the verdict
    table's header row ("claim" and each trained model's name) on every page the table spans."""
    import re

    import pypdf

    from powerlens.outputs.trace import traced_spans

    html = (root / f"results/{run}/replication.html").read_text(encoding="utf-8")
    values = len(traced_spans(html[:html.index('id="sources"')] if 'id="sources"' in html else html))
    reader = pypdf.PdfReader(root / f"results/{run}/replication.pdf")
    links = sum(1 for page in reader.pages for a in (page.get("/Annots") or [])
                if a.get_object().get("/Subtype") == "/Link")
    bad = [] if links >= values else [f"the PDF has {links} link annotations for {values} traced values"]
    texts = [page.extract_text() or "" for page in reader.pages]
    n = len(texts)
    bad += [f"PDF page {i + 1} has no page number '{i + 1} / {n}'" for i, t in enumerate(texts)
            if not re.search(rf"\b{i + 1} / {n}\s*$", t.strip())]
    from powerlens.analysis.claims.registry import CLAIMS, gist

    gists = [gist(c.id) for c in CLAIMS if gist(c.id)]
    flat = [" ".join(t.split()) for t in texts]  # a cell's words wrapped over lines read as one line
    first = next((i for i, t in enumerate(flat) if gists[0] in t), None)
    # the table ends before the next section ("What the evidence says"): its pages are first .. that page
    heading = "What the evidence says Each trained cell"  # the section's heading and its first words
    end = next((i for i, t in enumerate(flat) if heading in t), len(flat) - 1)
    for i in range(first + 1, end + 1) if first is not None else ():
        rows = [flat[i].find(g) for g in gists if g in flat[i]]
        stop = flat[i].find(heading)
        if not rows or (0 <= stop < min(rows)):
            continue  # no row of the table on this page
        if "synthetic layers" not in flat[i][:min(rows)]:  # the header row above the page's first row
            bad.append(f"the verdict table's header row is not repeated on PDF page {i + 1}")
    print(f"[article] PDF: {n} pages, {links} link annotations for {values} traced values")
    return bad


def main(folder: str, run: str) -> int:
    root = Path(folder)
    seen = first_screen(root / f"results/{run}/replication.html")
    text = " ".join(seen["text"].split())
    models = pd.read_csv(root / f"paper_tables/{run}/table_models.csv", dtype=str, keep_default_na=False)
    trained = list(models.loc[models["weights"].str.startswith("trained"), "model"])
    prov = json.loads((root / f"results/{run}/provenance.json").read_text())
    ran = {prov["models"][k]["arch"] for k in models.loc[models["weights"].str.startswith("trained"), "key"]}
    paper = yaml.safe_load((Path(__file__).resolve().parents[2] / "config/config.yaml").read_text())["models"]
    from powerlens.models.adapters import ADAPTERS

    missing = sorted({ADAPTERS[m["arch"]].family for m in paper.values() if m["arch"] not in ran})
    need = {**{f"trained model {m}": m for m in trained}, **{f"missing family {f}": f for f in missing},
            "law counts": "in the attention-only law (", "real-pass counts": "in the real forward pass (",
            "synthetic counts": "on the synthetic layers (", "pattern sentence": "What the pattern says:"}
    bad = [f"{what}: {s!r} is not on the first screen" for what, s in need.items() if s not in text]
    if not seen["evidence"]:
        bad.append("the section 'What the evidence says' (id evidence) is missing")
    bad += check_pdf(root, run)
    for b in bad:
        print(f"[article] {b}")
    print(f"[article] {'FAILED' if bad else 'PASSED'}: first screen at 1280x800 names {len(trained)} trained "
          f"models and {len(missing)} missing families ({', '.join(missing)}), the counts by where judged and the "
          "pattern; the evidence section " + ("exists" if seen["evidence"] else "is missing"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
