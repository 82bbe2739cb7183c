"""Issue #53, the article a referee believes in one minute: the first screen answers with its strength (summary,
compact verdict table with claim p, attainable p, robustness where it could differ and the matched control in the
cell), the paper's models with their stand-ins, every value's source a click away, a glossary of every term
linked at its first use, nothing named that the article lacks, real figure captions, the run's total time."""

import json
import re
from html import unescape

import pandas as pd
import pytest

from powerlens.outputs.article import Run, document
from powerlens.outputs.glossary import TERMS, dangling, unlinked_terms
from powerlens.outputs.render import to_html, to_typst
from powerlens.outputs.trace import traced_spans, untraced

from .test_article import run_dir  # noqa: F401  (the fixture: a run's article inputs)

CTRL = ": matched control (random attention weights)"


@pytest.fixture
def full_run(run_dir):  # noqa: F811
    """The fixture's run with a trained family beside its matched control, a synthetic claim, a not-judged claim,
    table_models, a paper config of two models and a speed table with its total row."""
    t = run_dir / "paper_tables/r"
    fam = "BERT (trained)"
    pd.DataFrame({"claim": ["C1", "C4", "C5", "C9"],
                  "statement": ["tilt", "bipartite", "ALBERT", "steering"],
                  fam: ["reproduced (claim p 0.0454; attainable p 1.06e-04) [4 of 6 agree]", "-", "-",
                        "not reproduced: min |cos| 0.739 < 0.9 [not varied: no Monte Carlo test]"],
                  fam + CTRL: ["passes in 3 of 3 seeds (s0: reproduced, claim p 1.22e-03; s1: reproduced, claim p "
                               "2e-03; s2: reproduced, claim p 1e-03)", "-", "-", "-"],
                  "synthetic layers": ["-", "reproduced (claim p 1.20e-03; attainable p 9.12e-55)", "-", "-"],
                  "not judged in this run": ["-", "-", "ALBERT (random-weight twins only)", "-"]}).to_csv(
        t / "table_claim_verdicts.csv", index=False)
    rows = [("C1", fam, "all-MiniLM-L6-v2 (trained weights)", "p 0.0454 (99% interval 0.043 to 0.0479)", "1.06e-04",
             "reproduced", "-", "fig_gamma", "0.0454", "-", "passes in 3 of 3 seeds", "2e-03"),
            ("C4", "synthetic", "synthetic layers", "p 1.20e-03 (exact stratified, one-sided)", "9.12e-55",
             "reproduced", "-", "fig_gamma", "1.20e-03", "-", "-", "-"),
            ("C9", fam, "all-MiniLM-L6-v2 (trained weights)", "-", "-", "not reproduced", "min |cos| 0.739 < 0.9",
             "fig_gamma", "-", "min |cos| 0.739 < 0.9", "-", "-")]
    pd.DataFrame([dict(zip(("claim", "family", "models", "claim p", "attainable p", "verdict", "failed part",
                            "figure", "p value", "first failed part", "control outcome", "control p value"), r),
                       statement="s", criterion="c", measured="m", null="n", outcome=r[5],
                       **{"attainable p value": r[4], "training p value": "0.84" if r[0] == "C1" else "-"})
                  for r in rows]).to_csv(t / "table_claims.csv", index=False)
    pd.DataFrame({"claim": ["C1", "C9"], "family": [fam, fam],
                  "agree": ["seeds 3 of 3; thirds 1 of 3; fragile: fails on a corpus third",
                            "not varied: no Monte Carlo test"]}).to_csv(t / "table_robustness.csv",
                                                                                         index=False)
    pd.DataFrame({"model": ["all-MiniLM-L6-v2", "albert-base-v2-twin"], "key": ["minilm-l6", "albert-base-v2-twin"],
                  "layers": [6, 12], "weights": ["trained weights", "random weights"]}).to_csv(
        t / "table_models.csv", index=False)
    from powerlens.pipeline.speed import with_total

    speed = pd.DataFrame({"model": ["m", "m"], "step": ["spectra", "steering"], "wall (s)": [4.0, 6.0],
                          "CPU (s)": [4.0, 7.0], "lower bound (s)": [0.5, 1.5], "wall / bound": [8.0, 4.0],
                          "weights": ["trained weights"] * 2})
    with_total(speed).to_csv(t / "table_speed.csv", index=False)
    prov = json.loads((run_dir / "results/r/provenance.json").read_text())
    prov["models"] = {"minilm-l6": {"arch": "bert", "source": "package"},
                      "albert-base-v2-twin": {"arch": "albert", "source": "random", "twin_of": "albert-base-v2"}}
    prov["config"] = {"dynamics": {"alpha": 0.05}}
    (run_dir / "results/r/provenance.json").write_text(json.dumps(prov))
    (run_dir / "config").mkdir()
    (run_dir / "config/config.yaml").write_text(
        "models:\n  albert-base-v2: {arch: albert, source: hf, repo_id: albert/albert-base-v2, revision: main}\n"
        "  bert-base-uncased: {arch: bert, source: hf, repo_id: google-bert/bert-base-uncased, revision: 86b5e09}\n")
    return run_dir


def _html(root):
    return to_html(document(Run("r", root), index=[{"output": "figures/r/fig_gamma.png", "rule": "plot_dynamics",
                                                        "log": "logs/r/plot_dynamics.log"}], command="snakemake"))


def test_the_first_screen_answers_with_its_strength(full_run):
    html = _html(full_run)
    assert untraced(html, full_run) == []
    table = html[html.index('<table class="verdicts">'):]
    table = table[:table.index("</table>")]
    text = unescape(re.sub(r"<[^>]+>", "", table))
    # the header names the model, its family, depth and weights; each cell its word, p, attainable p, control
    assert "all-MiniLM-L6-v2 (BERT family, 6 layers, trained weights)" in text
    assert ("reproduced \u00b7 p 0.0454, attainable 1.06e-04 [seeds 3 of 3; thirds 1 of 3; fragile: fails on a corpus "
            "third]matched controls: passes in 3 of 3 seeds (largest p over seeds 2e-03); training p (trained vs "
            "controls) 0.84") in text
    assert "reproduced \u00b7 p 1.20e-03, attainable 9.12e-55" in text  # the synthetic layers' cell
    assert "not varied" not in text and "min |cos| 0.739 < 0.9" in text  # no robustness where reruns cannot differ
    assert "not judged in this run: ALBERT (random-weight twins only)" in text and 'colspan=' in table
    first = unescape(re.sub(r"<[^>]+>", "", html[html.index('<p class="summary">'):].split("</p>")[0]))
    summary = unescape(re.sub(r"<[^>]+>", "", html[html.index('<p class="summary">'):html.index("<table")]))
    # #67: the stand-in named with what it is and what it stands in for, the families with none and why
    assert first.startswith("This run judged the paper's claims on 1 trained language model, not one of the "
                            "paper's own checkpoints. all-MiniLM-L6-v2 (BERT family, encoder, bidirectional "
                            "attention, trained weights, full precision) stands in for the paper's "
                            "google-bert/bert-base-uncased."), first
    assert ("The paper's ALBERT checkpoints have no trained stand-in here: this run loads no model from the Hugging "
            "Face hub") in first
    assert ("How sure, counting judged cells: 2 had a test that could have gone either way (attainable p below "
            "alpha 0.05)") in summary
    assert html.index('<p class="summary">') < html.index('<table class="verdicts">') < html.index('id="stand-ins"')


def test_the_paper_models_stand_ins_and_why_c5_is_not_judged(full_run):
    html = _html(full_run)
    spans = traced_spans(html)
    assert ("config/config.yaml", {"json": ["models", "bert-base-uncased", "repo_id"]},
            "google-bert/bert-base-uncased") in spans  # the paper's models read from the paper config
    text = unescape(re.sub(r"<[^>]+>", "", html))
    assert "albert/albert-base-v2 @ mainalbert-base-v2-twin (random weights)" in text
    assert "google-bert/bert-base-uncased @ 86b5e09all-MiniLM-L6-v2 (trained weights)trained stand-in" in text
    assert "C5 (ALBERT) is not judged" in text and "config/config.yaml), which loads the albert" in text


def test_every_value_links_to_its_source_entry(full_run):
    html = _html(full_run)
    ids = set(re.findall(r'<tr id="(src-[0-9a-f]+)"><td>([^<]*)</td>', html))
    entries = dict(ids)
    links = re.findall(r'<a class="src" href="#(src-[0-9a-f]+)"><span class="t[^"]*" data-src="([^"]*)" '
                       r"data-loc='[^']*' title=\"([^\"]*)\">", html)
    assert len(links) == html.count("data-src=") and links
    for key, src, title in links:
        assert entries[key] == src and title.startswith(src + " \u203a ")
    assert "text-decoration:underline dotted" in html
    src = to_typst(document(Run("r", full_run)), full_run)
    assert "[*field*], [*value*]" in src and "numbering:" in src  # the PDF's appendix, page numbers
    assert 'table.cell(colspan: 2, fill: luma(235))[*#"paper_tables/r/table_speed.csv"*]' in src  # one file a group


def test_every_glossary_term_is_defined_and_linked_and_nothing_dangles(full_run):
    html = _html(full_run)
    assert unlinked_terms(html) == [] and dangling(html) == [], unlinked_terms(html)
    for gid, term, forms, _ in TERMS:  # a term without surface forms (u) is defined for the tables' text only
        assert f'<dt id="{gid}">' in html and (not forms or f'href="#{gid}"' in html), term
    for word in ("gamma", "rho", "tilt"):  # defined in the article itself
        assert re.search(rf'<dt id="g-{word}">[^<]*</dt><dd>[^<]+', html)
    assert "section 4c" not in html and "docs/paper.md" not in html
    # a constructed article that names what it lacks fails
    bad = html.replace("</body>", "<p>As section 9 shows (Figure 7, Table 2), see <a href='#nowhere'>x</a>."
                                  "</p></body>")
    found = dangling(bad)
    assert len(found) == 4 and any("section 9" in f for f in found) and any("#nowhere" in f for f in found)
    assert unlinked_terms(html.replace('href="#g-kappa"', 'href="#x"')) == ["kappa: never linked at a use"]


def test_figures_carry_real_captions_and_are_small(full_run):
    import base64
    import io

    from PIL import Image

    from powerlens.outputs.figures.captions import CAPTIONS

    html = _html(full_run)
    assert f"<figcaption><b>Figure 1:</b> {CAPTIONS['fig_gamma'][:40]}" in html.replace("&#x27;", "'")
    png = base64.b64decode(re.search(r'src="data:image/png;base64,([^"]+)"', html).group(1))
    assert Image.open(io.BytesIO(png)).mode == "P"  # palette-quantized
    assert "max-height:780px" in html
    src = to_typst(document(Run("r", full_run)), full_run)
    assert 'caption: [#"Look at the solid curve of each panel, gamma_t' in src and 'caption: [#"fig_gamma"' not in src
    assert "#set text(size: 9.5pt)" in src


def test_the_run_total_time_and_the_methods_say_what_the_code_does(full_run):
    html = _html(full_run)
    spans = traced_spans(html)
    total = {loc["col"]: t for s, loc, t in spans if s.endswith("table_speed.csv") and "row" in loc
             and loc["row"] == {"model": "all heavy jobs", "step": "total"}}
    assert total["wall (s)"] == "10.0" and total["CPU (s)"] == "11.0" and total["lower bound (s)"] == "2.0"
    assert ("paper_tables/r/table_speed.csv", {"rows": {"where": [["step", "^(?!(total|run total)$)"]]}}, "2") in spans
    text = unescape(re.sub(r"<[^>]+>", "", html))
    assert "tested against one per-layer null" in text and "gamma (C6) and C10's FFN clause use the random" in text
    assert "against two nulls" not in text


def test_the_html_figures_keep_every_colour_of_the_plot(tmp_path):
    """The article's palette PNG keeps each pixel within a small colour error of the figure: the Okabe-Ito
    colours of the models and a viridis sweep stay what their legends say (48 median-cut colours moved a
    legend marker to another model's colour)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from PIL import Image

    from powerlens.outputs.figures.style import DISTINCT
    from powerlens.outputs.render import png_for_html

    fig, (a, b) = plt.subplots(1, 2, figsize=(7.2, 3))
    x = np.linspace(0, 1, 50)
    for i, c in enumerate(DISTINCT):
        a.plot(x, x * (i + 1), color=c, marker="o", markevery=7)
    for i, c in enumerate(plt.cm.viridis(np.linspace(0, 1, 12))):
        b.plot(x, np.sin(3 * x + i), color=c)
    b.scatter(*np.random.default_rng(0).random((2, 400)), c=np.arange(400), cmap="viridis", s=6)
    path = tmp_path / "f.png"
    fig.savefig(path, dpi=150)
    plt.close(fig)
    want = np.asarray(Image.open(path).convert("RGBA").convert("RGB"), dtype=int)
    got = np.asarray(Image.open(io.BytesIO(png_for_html(path))).convert("RGB"), dtype=int)
    assert got.shape == want.shape
    assert np.abs(got - want).sum(-1).max() <= 60
