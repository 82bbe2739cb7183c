"""The replication article (issue 40): every value traced to its file and read back; a doctored copy fails;
data never becomes markup in the HTML or the Typst source; the PDF opens with a heading per claim."""

import json

import pandas as pd
import pytest

from powerlens.outputs.article import Run, document
from powerlens.outputs.render import to_html, to_typst
from powerlens.outputs.trace import traced_spans, untraced

HOSTILE = 'x #sys.exit() *b* $y$ ] [ @ref <script>alert(1)</script> " \\ & ~'


@pytest.fixture
def run_dir(tmp_path):
    """A run's article inputs as the claims, provenance and plot steps write them (two claims, one family)."""
    t = tmp_path / "paper_tables/r"
    t.mkdir(parents=True)
    pd.DataFrame({"claim": ["C1", "C4"], "statement": ["tilt " + HOSTILE, "bipartite"],
                  "BERT": ["not reproduced: law: tilt significant in 0 of 6 layers [6 of 6 agree]", "-"],
                  "synthetic layers": ["-", "not reproduced: Fisher p 0.698 >= 0.05"]}).to_csv(
        t / "table_claim_verdicts.csv", index=False)
    pd.DataFrame({"claim": ["C1", "C4"], "statement": ["tilt", "bipartite"], "family": ["BERT", "synthetic"],
                  "models": ["m", "synthetic layers"], "criterion": ["law, Holm < 0.05", "Fisher"],
                  "measured": ["0 of 6 layers; median tilt 0.0431", "-"], "null": ["random directions", "-"],
                  "verdict": ["not reproduced"] * 2, "failed part": ["0 of 6", "Fisher p 0.698 >= 0.05"],
                  "would flip if": ["law: 3 more of the 6 layers would have to be significant", "-"],
                  "figure": ["fig_gamma, table_alignment", "-"], "outcome": ["not reproduced"] * 2,
                  "p value": ["-", "-"], "first failed part": ["0 of 6", "Fisher p 0.698 >= 0.05"]}).to_csv(
        t / "table_claims.csv", index=False)
    pd.DataFrame({"model": ["m"], "step": ["spectra"], "wall (s)": [4.0], "lower bound (s)": [0.0125],
                  "wall / bound": [320.0], "weights": ["trained"]}).to_csv(t / "table_speed.csv", index=False)
    pd.DataFrame({"claim": ["C1"], "family": ["BERT"], "agree": ["seeds 3 of 3; thirds 3 of 3"]}).to_csv(
        t / "table_robustness.csv", index=False)
    (tmp_path / "results/r").mkdir(parents=True)
    (tmp_path / "results/r/provenance.json").write_text(json.dumps(
        {"run": "r", "end_time": "2026-12-03T08:23:12+00:00", "config_sha256": "abc123",
         "versions": {"powerlens": "0.1.0", "torch": "2.13.0"},
         "code": {"commit": "f00d", "uncommitted_changes": False},
         "blas": [{"internal_api": "openblas", "prefix": "libopenblas", "version": "0.3", "architecture": "x"}]}))
    (tmp_path / "figures/r").mkdir(parents=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(2, 1))
    fig.savefig(tmp_path / "figures/r/fig_gamma.png")
    plt.close(fig)
    return tmp_path


INDEX = [{"output": "figures/r/fig_gamma.png", "rule": "plot_dynamics", "log": "logs/r/plot_dynamics.log"}]


def test_every_value_is_read_back_and_a_doctored_copy_fails(run_dir):
    html = to_html(document(Run("r", run_dir), index=INDEX, command="snakemake --cores N --configfile c.yaml"))
    spans = traced_spans(html)
    assert len(spans) >= 12 and untraced(html, run_dir) == []
    assert any(text == "0.698" or "0.698" in text for _, _, text in spans)
    doctored = html.replace("Fisher p 0.698", "Fisher p 0.699", 1)
    assert doctored != html
    bad = untraced(doctored, run_dir)
    assert len(bad) == 1 and "the article says" in bad[0] and "0.699" in bad[0]
    counts = {json.dumps(loc): text for _, loc, text in spans if "count" in loc}
    assert counts['{"count": "not reproduced"}'] == "2" and counts['{"count": "reproduced"}'] == "0"
    # what would flip the verdict, the speed table and the index are in it, the speed figures traced
    assert "3 more of the 6 layers would have to be significant" in html and "320.0" in html
    assert "logs/r/plot_dynamics.log" in html and "snakemake --cores N --configfile c.yaml" in html
    assert ("paper_tables/r/table_speed.csv", {"row": {"model": "m", "step": "spectra"}, "col": "wall / bound"},
            "320.0") in spans


def test_data_is_never_markup(run_dir):
    blocks = document(Run("r", run_dir))
    html = to_html(blocks)
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    src = to_typst(blocks, run_dir)
    assert '#"tilt x #sys.exit() *b* $y$ ] [ @ref <script>alert(1)</script> \\" \\\\ & ~"' in src  # a string literal


def test_the_pdf_opens_with_a_heading_per_claim(run_dir):
    import pypdf
    import typst

    blocks = document(Run("r", run_dir))
    pdf = typst.compile(to_typst(blocks, run_dir).encode(), root=str(run_dir))
    (run_dir / "a.pdf").write_bytes(pdf)
    reader = pypdf.PdfReader(run_dir / "a.pdf")
    text = "".join(p.extract_text() for p in reader.pages)
    assert len(reader.pages) >= 1 and "C1" in text and "C4" in text
    assert "#sys.exit() *b* $y$ ] [ @ref" in text  # the hostile statement printed as the characters it is


@pytest.mark.parametrize("controls", [False, True])
def test_the_summary_speaks_of_controls_only_where_the_run_has_them(run_dir, controls):
    """#69: with `matched_controls: false` the summary still said "in 0 of the reproduced cells the same test on
    random weights passes too"."""
    from powerlens.outputs.article_front import summary
    from powerlens.outputs.trace import CONTROL_SUFFIX

    t = run_dir / "paper_tables/r"
    pd.DataFrame({"model": ["m"], "weights": ["trained weights"]}).to_csv(t / "table_models.csv", index=False)
    v = pd.read_csv(t / "table_claim_verdicts.csv")
    if controls:
        v["BERT" + CONTROL_SUFFIX] = ["reproduced", "-"]
    v.to_csv(t / "table_claim_verdicts.csv", index=False)
    parts = [x for b in summary(Run("r", run_dir)) for x in b[1]]
    text = "".join(getattr(x, "text", x) for x in parts)
    assert text.startswith("This run judged the paper's claims on 1 trained language model(s)")
    assert ("reproduced cells with matched controls" in text) == controls, text
