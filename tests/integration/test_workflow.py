"""Snakemake end to end on the tiny-twin config, the paper config's plan, lint, and bad configs."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ..conftest import REPO

pytestmark = pytest.mark.integration
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]


def smk(*args, cwd, env=None, timeout=600):
    return subprocess.run(SNAKEMAKE + list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def planned_jobs(out: str) -> dict[str, int]:
    """Rule -> job count from Snakemake's "Job stats" table."""
    planned = {}
    for ln in out[out.index("Job stats"):].splitlines()[3:]:
        if not ln.split() or ln.split()[0] == "total":
            break
        planned[ln.split()[0]] = int(ln.split()[1])
    return planned


def patched_config(tmp_path, patch, name="patched.yaml") -> Path:
    cfg = yaml.safe_load((REPO / "config/test.yaml").read_text())
    patch(cfg)
    (tmp_path / name).write_text(yaml.safe_dump(cfg))
    return tmp_path / name


def copied_run(run: Path, tmp_path: Path) -> Path:
    """A copy of a finished run folder (modification times and Snakemake's records kept), to change freely."""
    import shutil

    shutil.copytree(run, tmp_path / "run", symlinks=True)
    # the copy is another config's to change: forget which config made it (powerlens.pipeline.run_folder)
    (tmp_path / "run" / "results" / "test" / ".powerlens-run.json").unlink(missing_ok=True)
    return tmp_path / "run"


@pytest.fixture(scope="module")
def test_run(tmp_path_factory):
    """Run the whole DAG on config/test.yaml in a scratch directory (once for this module)."""
    work = tmp_path_factory.mktemp("run")
    r = smk("--cores", "2", "--configfile", str(REPO / "config/test.yaml"), "--directory", str(work), cwd=work,
            env={"POWERLENS_TRACE_MODULES": str(work / ".modules")})  # each step's loaded modules (below)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return work


def test_every_module_a_step_loads_is_in_its_code_hash(test_run):
    """The modules each step's process really loaded (however: imports, a lazy __getattr__, import_module) all
    lie in the closure its code hash covers, so no edit of code a step runs leaves it current. Before the
    closure followed run-time imports, theory loaded its four modules through its package's __getattr__ and
    none of them was in its hash."""
    from powerlens.pipeline import code_hash
    from powerlens.pipeline.steps import STEPS

    graph = code_hash.import_graph()
    traces = sorted((test_run / ".modules").glob("*.txt"))
    seen = {t.name.split(".")[0] for t in traces}
    assert {"theory", "dynamics", "claims", "article", "fetch_model", "extract"} <= seen <= set(STEPS)
    for t in traces:
        step = t.name.split(".")[0]
        loaded = set(t.read_text().split())
        assert "powerlens.pipeline.steps." + step in loaded
        outside = loaded - set(code_hash.closure(step, graph=graph))
        assert not outside, (step, sorted(outside))


def test_end_to_end_outputs(test_run):
    res = test_run / "results/test"
    for m in ("tiny-albert", "tiny-bert", "tiny-gpt2", "tiny-gpt-neo", "tiny-gemma3"):
        check = json.loads((res / m / "extraction_check.json").read_text())
        # the step refuses a failed check, so read the measured errors against their tolerances
        assert all(0 <= c["max_abs_error"] <= c["tolerance"] for c in check["checks"].values())
        assert check["checks"]["float64"]["max_abs_error"] < 1e-10
        meta = json.loads((res / m / "weights.json").read_text())
        assert meta["weights_label"] == "random weights" and meta["random_weights"] is True
        assert (test_run / f"logs/test/extract/{m}.log").exists()
        assert (test_run / f"benchmarks/test/extract/{m}.tsv").exists()
    assert json.loads((res / "tiny-albert/extraction_check.json").read_text())["albert_single_F"]
    lock = yaml.safe_load((res / "models.lock.yaml").read_text())
    assert set(lock["models"]) == {"tiny-albert", "tiny-bert", "tiny-gpt2", "tiny-gpt-neo", "tiny-gemma3"}
    md = (test_run / "paper_tables/test/table_models.md").read_text()
    assert md.count("random weights") == 5
    for ext in ("csv", "tex"):
        assert (test_run / f"paper_tables/test/table_models.{ext}").stat().st_size > 0


def test_spectra_outputs_and_byte_identical_rerun(test_run, tmp_path):
    """Forced again, the spectra and their table are byte-identical. The rerun happens in a copy of the run, so
    the module's shared run keeps its files and times as the pipeline left them for every later test."""
    test_run = copied_run(test_run, tmp_path)
    tables = [test_run / f"paper_tables/test/table_spectra.{e}" for e in ("csv", "md", "tex")]
    per_model = sorted((test_run / "results/test").glob("*/spectra.csv"))
    assert len(per_model) == 5
    before = [p.read_bytes() for p in tables + per_model]
    for f in ("fig_spectra", "fig_gap"):
        for e in ("pdf", "png"):
            assert (test_run / f"figures/test/{f}.{e}").stat().st_size > 1000
    assert tables[1].read_text().count("random weights") == 5
    # only the spectra and their table and figure are redone (a bare --forcerun would redo all downstream)
    r = smk("--cores", "2", "--configfile", str(REPO / "config/test.yaml"), "--directory", str(test_run),
            "--forcerun", "spectra", "plot_spectra", "--", "paper_tables/test/table_spectra.csv",
            "figures/test/fig_spectra.png", cwd=test_run)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (r.stdout + r.stderr).count("rule spectra:") == len(per_model)
    assert [p.read_bytes() for p in tables + per_model] == before


def test_dynamics_and_theory_outputs(test_run):
    import pandas as pd

    t = pd.read_csv(test_run / "paper_tables/test/table_alignment.csv")
    assert len(t) == 10 and set(t["mode"]) == {"model", "attention-only"}
    assert (t["weights"] == "random weights").all()
    albert = t[(t["model"] == "tiny-albert") & (t["mode"] == "attention-only")]
    depth = json.loads((test_run / "results/test/tiny-albert/weights.json").read_text())["n_layers"]
    assert int(albert["layers"].iloc[0]) == depth  # statistics over the model's own depth...
    long = pd.read_csv(test_run / "results/test/tiny-albert/dynamics-attention-only.csv")
    assert len(long) == 40 and long["rho_p_holm"].notna().sum() == depth  # ...of a run past it
    assert long["span_M_final_p"].notna().sum() == 1  # consensus subspace tested at the final step (C5)
    for m in ("tiny-bert", "tiny-gpt2"):
        d = pd.read_csv(test_run / f"results/test/{m}/dynamics-model.csv")
        for stat in ("gamma", "rho", "tilt"):
            assert d[[f"{stat}_null_median", f"{stat}_null_q95", f"{stat}_pct", f"{stat}_p",
                      f"{stat}_p_holm", f"{stat}_ties", f"{stat}_saturated"]].notna().all().all()
        # Monte Carlo p with R = 2000 draws and a seeded tie-break, (#{>} + U (1 + #{=})) / 2001: recomputed
        # here from the per-draw counts the step stored in its .npz, depth by depth (a p not made from the
        # stored null, or from another tie-break, fails; a bound like 0 < p <= 1 could not)
        import numpy as np

        from powerlens.analysis.nulls import tie_uniform

        with np.load(test_run / f"results/test/{m}/dynamics-model.npz") as z:
            inc, dec, s_inc, s_dec = z["null_inc_lead"], z["null_dec_lead"], z["sum_lead_inc"], z["sum_lead_dec"]
        assert inc.shape == (len(d), 2000)
        for i, row in d.iterrows():  # rho exactly (the CSV holds 10 digits: ties would move)
            if row["rho_R"] != 2000:
                continue  # extended past the stored draws (paper.md section 4c): its p uses more of the stream
            null = np.where(inc[i] + dec[i] > 0, inc[i] / np.maximum(inc[i] + dec[i], 1), np.nan)
            lead, null = s_inc[i] / (s_inc[i] + s_dec[i]), null[~np.isnan(null)]
            u = tie_uniform(0, int(row["layer"]), "rho")
            p = (np.sum(null > lead) + u * (1 + np.sum(null == lead))) / (1 + len(null))  # the formula, by hand
            assert p == pytest.approx(row["rho_p"], rel=1e-9), (m, i)
    meta = json.loads((test_run / "results/test/tiny-gpt2/dynamics-model.json").read_text())
    assert meta["n_prompts"] == 24 and meta["n_tokens"] > 0 and meta["random_weights"]
    th = pd.read_csv(test_run / "paper_tables/test/table_theory.csv")
    full = th[(th["attention"] == "full") & ~th["case"].str.endswith("verdict")]  # the two uniform-attention controls
    assert (full["check"] == "pass").all() and len(full) == 2
    st = pd.read_csv(test_run / "paper_tables/test/table_steering.csv")
    assert set(st["model"]) == {"tiny-albert", "tiny-bert", "tiny-gpt2", "tiny-gpt-neo", "tiny-gemma3"}
    for m in ("tiny-albert", "tiny-bert", "tiny-gpt2", "tiny-gpt-neo", "tiny-gemma3"):
        sj = json.loads((test_run / f"results/test/{m}/steering.json").read_text())
        # the recorded checksum is that of the weights on disk, loaded afresh (the step refuses a changed one)
        import transformers

        from powerlens.analysis.steering import checksum, config_has_lm_head
        from powerlens.models.sources import load_model

        man = json.loads((test_run / f"results/test/{m}/manifest.json").read_text())
        head = config_has_lm_head(transformers.AutoConfig.from_pretrained(man["path"], local_files_only=True))
        assert sj["checksum_after"] == checksum(load_model(man, head=head))
    for f in ("fig_gamma", "fig_rho", "fig_tilt", "fig_albert_consensus_twins", "fig_albert_rotation_twins",
              "fig_theory", "fig_steering"):
        assert (test_run / f"figures/test/{f}.png").stat().st_size > 1000
    for f in NOTE_ONLY:  # no figure for a kind of model the run does not have (no trained ALBERT)
        assert not (test_run / f"figures/test/{f}.png").exists()
    # greedy continuations: the causal LMs with a token target at every kappa; none for encoders
    c = pd.read_csv(test_run / "results/test/tiny-gemma3/steering_continuations.csv", keep_default_na=False)
    assert sorted(set(c["kappa"])) == [0, 4, 64] and set(c["prompt"]) == {"The cat"}
    assert len(pd.read_csv(test_run / "results/test/tiny-bert/steering_continuations.csv")) == 0
    ct = pd.read_csv(test_run / "paper_tables/test/table_continuations.csv", keep_default_na=False)
    assert set(ct["model"]) == {"tiny-gpt2", "tiny-gpt-neo", "tiny-gemma3"}  # the causal LMs
    assert (ct["model"] == "tiny-gemma3").sum() == 3  # one token target x three kappas x one prompt


FIGURES = ["fig_spectra", "fig_gap", "fig_gamma", "fig_gamma_gap", "fig_rho", "fig_tilt", "fig_albert_consensus",
           "fig_albert_rotation", "fig_theory", "fig_steering"]
TABLES = ["table_claim_verdicts", "table_claims", "table_claims_twins", "table_robustness", "table_models",
          "table_spectra", "table_alignment", "table_theory", "table_steering", "table_continuations",
          "table_quantization", "table_speed"]
#: Figures whose trained part the test run does not write (no trained ALBERT): only their random-weight part.
NOTE_ONLY = ["fig_albert_consensus", "fig_albert_rotation"]


def test_report_in_headless_chromium(test_run):
    """The HTML report loads in a real browser without console errors and holds every figure and table; its
    build prints no docutils message. The front page reads from its top at 1280x800 and 1920x1080 (title, the
    claims link and the verdict table's first row inside the window at load, the page scrolls to its end,
    nothing scrolls sideways: the page, its panes, the table); one click on "Replication article" opens the
    article (its title read from the frame's document, not a blank pane) and one on "Claims at a glance" the
    verdict view; a source link clicked inside the article's pane (a blob URL in a frame) scrolls to its entry,
    with no "Not allowed to load local resource"; the PDF is an entry of the report."""
    import html
    import re

    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    assert Path(chromium).exists(), "Debian's chromium is needed: apt-get install chromium (.ci/run does it)"
    report = test_run / "results/test/report.html"
    r = smk("--configfile", str(REPO / "config/test.yaml"), "--directory", str(test_run), "--report", str(report),
            cwd=test_run)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "(ERROR/" not in r.stderr and "(WARNING/" not in r.stderr and "(SEVERE/" not in r.stderr, r.stderr[-3000:]
    raw = report.read_text()
    assert "System Message" not in raw and "system-message" not in raw
    artifacts = REPO / "tests/artifacts"
    artifacts.mkdir(exist_ok=True)
    title = re.search(r"<title>(.*?)</title>", (test_run / "results/test/replication.html").read_text(), re.S)
    errors, seen = [], {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        for w, h in ((1280, 800), (1920, 1080)):
            page = browser.new_page(viewport={"width": w, "height": h})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(report.as_uri())
            link = page.get_by_text("Claims at a glance").first
            link.wait_for()  # the report's app has rendered its front page
            seen[w] = page.evaluate("""() => {
                const box = x => x.getBoundingClientRect();
                const desc = document.querySelector('.prose');
                const a = [...document.querySelectorAll('a')].find(x => x.textContent.includes('Claims at a glance'));
                const main = desc.closest('.h-screen');
                const row = document.querySelector('.prose table.pl-verdicts tbody tr');
                const panes = [document.documentElement, main, desc, document.querySelector('nav'),
                               document.querySelector('.prose table.pl-verdicts')];
                const before = {title: box(desc.firstElementChild).top, link: box(a).bottom,
                                row: row ? [box(row).top, box(row).bottom] : null,
                                sideways: panes.filter(x => x && x.scrollWidth > x.clientWidth + 1)
                                               .map(x => x.tagName + '.' + x.className),
                                wide: document.documentElement.scrollWidth <= window.innerWidth};
                main.scrollTop = main.scrollHeight;
                return {...before, atEnd: Math.abs(main.scrollTop + main.clientHeight - main.scrollHeight) < 2,
                        text: document.body.innerText};
            }""")
            page.screenshot(path=str(artifacts / f"report_{w}.png"))
            page.get_by_text("Replication article").first.click()
            page.wait_for_timeout(3000)
            seen[w]["article"] = [f.title() for f in page.frames if f != page.main_frame]
            page.screenshot(path=str(artifacts / f"report_article_{w}.png"))
            # a source link clicked inside the pane (a blob URL in a frame) scrolls to its appendix entry (#67)
            pane = next(f for f in page.frames if f.url.startswith("blob:"))
            key = pane.evaluate("() => document.querySelector('a.src').getAttribute('href').slice(1)")
            entry = """id => { const e = document.getElementById(id), r = e.getBoundingClientRect();
                return {top: r.top, bottom: r.bottom, h: window.innerHeight, hit: e.classList.contains('hit'),
                        url: location.href}; }"""
            before = pane.evaluate(entry, key)
            pane.locator("a.src").first.click()
            page.wait_for_timeout(800)
            seen[w]["source"] = {**pane.evaluate(entry, key), "before": before["top"]}
            page.screenshot(path=str(artifacts / f"report_article_source_{w}.png"))
            page.goto(report.as_uri())
            link = page.get_by_text("Claims at a glance").first
            link.wait_for()
            link.click()
            page.wait_for_timeout(1500)
            frames = [f.content() for f in page.frames if f != page.main_frame]
            seen[w]["verdicts"] = any("Claims at a glance" in c and "reproduced" in c for c in frames)
            page.screenshot(path=str(artifacts / f"report_claims_{w}.png"))
            page.close()
        browser.close()
    assert errors == [], errors
    for w, h in ((1280, 800), (1920, 1080)):
        v = seen[w]
        assert 0 <= v["title"] < h and 0 < v["link"] <= h, (w, v)  # readable from the top, the claims link visible
        assert v["row"] and 0 <= v["row"][0] and v["row"][1] <= h, (w, v["row"])  # the verdicts' first row
        assert v["wide"] and v["sideways"] == [], (w, v["sideways"])
        assert title and v["article"] == [html.unescape(title.group(1).strip())], (w, v["article"])
        assert v["atEnd"] and v["verdicts"], (w, {k: v[k] for k in ("atEnd", "verdicts")})
        s = v["source"]  # below the first screen before the click, inside the pane's window after it, marked
        assert s["before"] > s["h"] and 0 <= s["top"] and s["bottom"] <= s["h"] and s["hit"], (w, s)
        assert s["url"].startswith("blob:"), (w, s)  # the pane still shows the article (no failed navigation)
    assert not [e for e in errors if "Not allowed to load local resource" in e], errors
    assert "Modelling choices" in seen[1280]["text"] and "1 Claims" in seen[1280]["text"]
    # each figure once (PNG), each table once (rendered HTML); the other formats are files beside them
    cats = json.loads(re.search(r"var categories = (\{.*?\});", raw).group(1))
    entries = [f for sub in cats.values() for files in sub.values() for f in files]
    names = sorted(Path(f).name for f in entries)
    twins = [f"{n}_twins.png" for n in FIGURES if n != "fig_theory"]  # per-model figures, drawn from twins
    assert names == sorted([f"{n}.png" for n in FIGURES if n not in NOTE_ONLY] + twins
                           + [f"{n}.html" for n in TABLES]
                           + ["provenance.json", "modelling_choices.html", "replication.html",
                              "replication.pdf"]), names
    twin_cat = [Path(f).name for sub in cats["8 Twins: not evidence"].values() for f in sub]
    assert sorted(twin_cat) == sorted(twins + ["table_claims_twins.html"]), twin_cat
    assert next(iter(sorted(cats))) == "0 Replication"
    assert sorted(Path(f).name for sub in cats["0 Replication"].values() for f in sub) == [
        "replication.html", "replication.pdf"]
    assert "The answer:" in seen[1280]["text"] and "Replication article" in seen[1280]["text"]


def test_the_article_reads_back_matches_the_verdicts_and_opens(test_run, tmp_path):
    """replication.html: every traced value read back from its file (a doctored copy fails), each judged cell's
    verdict word equal to table_claim_verdicts', every glossary term defined and linked, nothing named that the
    article lacks; opened in headless Chromium at 1280x800: the summary and the verdict table's top on the first
    screen, no figure taller than the screen, no sideways scroll, every traced value with a title and a link to
    its appendix entry naming its file, no console error; replication.pdf: a line per claim."""
    import re

    import pypdf
    from playwright.sync_api import sync_playwright

    from powerlens.outputs.glossary import dangling, unlinked_terms
    from powerlens.outputs.trace import WORDS, traced_spans, untraced

    def verdict_word(cell: str) -> str:  # the test's own reading of a verdict-view cell, independent of the article
        return next((w for w in sorted(WORDS + ("not judged",), key=len, reverse=True) if cell.startswith(w)), "-")

    html = (test_run / "results/test/replication.html").read_text(encoding="utf-8")
    spans = traced_spans(html)
    assert len(spans) > 50 and untraced(html, test_run) == []
    assert dangling(html) == [] and unlinked_terms(html) == []
    speed = [x for x in spans if x[0] == "paper_tables/test/table_speed.csv" and x[1].get("col") == "wall (s)"]
    src, loc, text = speed[0]
    assert speed and float(text) > 0
    doctored = html.replace(f">{text}</span>", f">{float(text) + 1:.1f}</span>", 1)
    assert doctored != html and len(untraced(doctored, test_run)) >= 1
    verdicts = pd.read_csv(test_run / "paper_tables/test/table_claim_verdicts.csv", dtype=str,
                           keep_default_na=False)
    claims = pd.read_csv(test_run / "paper_tables/test/table_claims.csv", dtype=str, keep_default_na=False)
    shown = {(loc["row"]["claim"], loc["row"]["family"]): t for s_, loc, t in spans
             if s_.endswith("table_claims.csv") and "row" in loc and loc["col"] == "outcome"}
    for _, r in claims[~claims["verdict"].str.startswith("not judged")].iterrows():
        col = "synthetic layers" if r["family"] == "synthetic" else r["family"]
        want = verdict_word(verdicts.loc[verdicts["claim"] == r["claim"], col].iloc[0])
        assert shown[(r["claim"], r["family"])] == want, (r["claim"], r["family"])
    assert {c for c in verdicts["claim"]} <= {t for s_, loc, t in spans if s_.endswith("table_claim_verdicts.csv")
                                               and loc.get("col") == "claim"}
    reader = pypdf.PdfReader(test_run / "results/test/replication.pdf")
    text = "\n".join(p.extract_text() for p in reader.pages)
    assert len(reader.pages) >= 2 and all(re.search(rf"^{c}\b", text, re.M) for c in verdicts["claim"]), text[:2000]
    captions = re.findall(r"Figure\s(\d+):\s?(\S+)", text)
    assert captions and not [c for c in captions if c[1].startswith("fig_")], captions  # captions, not file names
    (REPO / "tests/artifacts").mkdir(exist_ok=True)
    errors = []
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        for w, h in ((1280, 800), (1920, 1080)):
            page = browser.new_page(viewport={"width": w, "height": h})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((test_run / "results/test/replication.html").as_uri())
            wide = page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
            assert wide, f"the article scrolls sideways at {w} px"
            page.screenshot(path=str(REPO / f"tests/artifacts/replication_{w}.png"))
            if w == 1280:
                first = page.evaluate("""() => ({
                    summary: document.querySelector('p.summary').getBoundingClientRect().bottom,
                    table: document.querySelector('table.verdicts').getBoundingClientRect().top,
                    tallest: Math.max(0, ...Array.from(document.images).map(
                        i => i.getBoundingClientRect().height))})""")
                assert first["summary"] <= 800 and first["table"] < 800 and first["tallest"] <= 800, first
                bad = page.evaluate("""() => Array.from(document.querySelectorAll('[data-src]')).filter(e => {
                    const a = e.closest('a[href^="#"]');
                    const entry = a && document.getElementById(a.getAttribute('href').slice(1));
                    return !e.title || !e.title.includes(e.dataset.src) || !entry
                        || !entry.textContent.includes(e.dataset.src)
                        || getComputedStyle(e).textDecorationStyle !== 'dotted';
                }).map(e => e.outerHTML.slice(0, 200))""")
                assert bad == [], bad[:3]
            page.close()
        browser.close()
    assert errors == [], errors


SCRIPT_PROBE = '</script><script>window.__pwned="script"</script>'
IMG_PROBE = '<img src=x onerror="window.__pwned=\'img\'">'


def open_in_chromium(pages: list[Path]) -> dict[str, dict]:
    """Open each page in headless Chromium: whether any of the probes' code ran (window.__pwned set, a
    dialog opened) and the page's text."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        for path in pages:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            dialogs = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(path.as_uri())
            page.wait_for_timeout(1500)
            out[path.name] = {"pwned": page.evaluate("() => window.__pwned === undefined ? null : window.__pwned"),
                              "dialogs": dialogs, "text": page.inner_text("body")}
            page.close()
        browser.close()
    return out


def test_config_text_never_runs_in_the_report(test_run, tmp_path):
    """Labels, the description and continuation prompts holding `</script>` and `<img onerror>`: the report
    is built from the finished run with that config and opened in Chromium. Snakemake embeds every job's
    params in an inline script; config text reaches them as JSON with <, > and & escaped, so nothing runs.
    A raw or include directive in the description stays text, and no local file is embedded."""
    marker = tmp_path / "secret.txt"
    marker.write_text("SECRET-MARKER-5501\n")

    def patch(c):
        c["description"] = (f"probe {SCRIPT_PROBE} {IMG_PROBE}\n\n.. raw:: html\n\n   {IMG_PROBE}\n\n"
                            f".. include:: {marker}\n")
        for i, m in enumerate(c["models"].values()):  # labels of their own (two models never share one), each
            # within the schema's 64 characters: the script probe and the image probe on alternate models
            m["label"] = f"L{i} {SCRIPT_PROBE if i % 2 == 0 else IMG_PROBE} & $x^"
            m["about"] = f"about {IMG_PROBE if i % 2 == 0 else SCRIPT_PROBE} #sys.exit() $y$"  # #67: the first screen
        c["prompts_about"] = f"prompts {SCRIPT_PROBE} {IMG_PROBE} #eval() [x]"  # #67: the Data section
        c["steering"]["continuations"]["prompts"] = [f"The cat {SCRIPT_PROBE}"]

    cfg = patched_config(tmp_path, patch)
    run = copied_run(test_run, tmp_path)
    r = smk("--cores", "2", "--configfile", str(cfg), "--directory", str(run), cwd=run)  # the report needs them
    assert r.returncode == 0, r.stderr[-2000:]
    report = tmp_path / "probe-report.html"
    r = smk("--configfile", str(cfg), "--directory", str(run), "--report", str(report), cwd=run)
    assert r.returncode == 0, r.stderr[-2000:]
    raw = report.read_text()
    assert SCRIPT_PROBE not in raw and "SECRET-MARKER-5501" not in raw
    article = run / "results/test/replication.html"
    both = open_in_chromium([report, article])
    seen = both[report.name]
    assert seen["pwned"] is None and seen["dialogs"] == [], seen
    assert "raw:: html" in seen["text"] and "include::" in seen["text"]  # the description, shown as text
    shown = both[article.name]  # the corpus's description in the article's Data section: shown as text, never run
    assert shown["pwned"] is None and shown["dialogs"] == [] and "prompts </script><script>" in shown["text"], shown


def test_a_report_of_outputs_older_than_the_config_is_refused_naming_a_stale_file(test_run, tmp_path):
    """After a config change that changes outputs (a kappa, a label), `--report` exits non-zero before writing
    anything, naming the first stale output and the command that brings it up to date; the unchanged config's
    report builds (test_report_in_headless_chromium)."""
    for patch, where in ((lambda c: c["steering"].update(kappas=[0, 8, 128]), "results/test/tiny-albert/steering"),
                         (lambda c: c["models"]["tiny-bert"].update(label="Renamed BERT"), "")):
        cfg = patched_config(tmp_path, patch)
        report = tmp_path / "stale.html"
        r = smk("--configfile", str(cfg), "--directory", str(test_run), "--report", str(report), cwd=test_run)
        assert r.returncode == 2 and f"out of date for the current config and code: {where}" in r.stderr, \
            r.stderr[-2000:]
        assert "params changed" in r.stderr and "  fix: " in r.stderr
        command = r.stderr.split("fix:")[1].split("`")[1]  # the command that brings the outputs up to date
        assert f"--configfile {cfg}" in command and "--report" not in command and "stale.html" not in command
        assert not report.exists()


def test_a_table_edited_after_its_step_never_reaches_the_report_or_the_article(test_run, tmp_path):
    """#69: a verdict edited in table_claim_verdicts.html by sed reached the Snakemake report, and table_models.csv
    edited so a twin read "trained weights" reached the article through `--forcerun article`. Both are refused,
    naming the file and the step to rerun; the unedited copy's report builds."""
    run = copied_run(test_run, tmp_path)
    args = ("--configfile", str(REPO / "config/test.yaml"), "--directory", str(run))
    html = run / "paper_tables/test/table_claim_verdicts.html"
    written = html.read_bytes()
    html.write_text(html.read_text().replace("not reproduced", "reproduced"))
    r = smk(*args, "--report", str(tmp_path / "r.html"), cwd=run)
    assert r.returncode == 2 and "table_claim_verdicts.html is not the file the claims step wrote" in r.stderr, \
        r.stderr[-2000:]
    assert "--forcerun claims" in r.stderr and not (tmp_path / "r.html").exists()
    html.write_bytes(written)  # the claims step's bytes again: now table_models is the edited one
    models = run / "paper_tables/test/table_models.csv"
    models.write_text(models.read_text().replace("random weights", "trained weights"))
    r = smk(*args, "--cores", "1", "--forcerun", "article", "--", "results/test/replication.html", cwd=run)
    assert r.returncode != 0 and "table_models.csv is not the file the table_models step wrote" in \
        r.stdout + r.stderr, (r.stdout + r.stderr)[-2000:]


def test_control_characters_in_config_text_stop_the_report_and_the_renderer_holds_anyway(test_run, tmp_path):
    """U+2028, U+2029, NEL, VT, FF and CR end a line for docutils: a description holding them is refused at
    load (exit status 2, the character named). The front page's renderer does not rely on that refusal: given
    each probe directly, the HTML it makes runs nothing and embeds no file in Chromium."""
    from ..unit.test_untrusted_text import hostile_descriptions, render_front_page

    cfg = patched_config(tmp_path, lambda c: c.update(description="x\u2028.. raw:: html\u2028\u2028   <img src=x>"))
    r = smk("--configfile", str(cfg), "--directory", str(test_run), "--report", str(tmp_path / "r.html"),
            cwd=test_run)
    assert r.returncode == 2 and "U+2028" in r.stderr and "  fix: " in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "r.html").exists()
    marker = tmp_path / "secret.txt"
    marker.write_text("SECRET-MARKER-6602\n")
    pages = []
    for name, desc in hostile_descriptions(marker).items():
        page = tmp_path / f"front-{name.replace('+', '')}.html"
        page.write_text(f"<!DOCTYPE html><html><body>{render_front_page(desc)}</body></html>")
        pages.append(page)
    for name, seen in open_in_chromium(pages).items():
        assert seen["pwned"] is None and seen["dialogs"] == [], (name, seen)
        assert "SECRET-MARKER-6602" not in seen["text"] and "raw:: html" in seen["text"], name


def test_plot_option_recomputes_no_numbers(test_run, tmp_path):
    cfg = (REPO / "config/test.yaml").read_text() + "plot: {dpi: 120}\n"
    (tmp_path / "dpi.yaml").write_text(cfg)
    r = smk("-n", "--configfile", str(tmp_path / "dpi.yaml"), "--directory", str(test_run), cwd=test_run)
    assert r.returncode == 0, r.stderr[-2000:]
    planned = set(planned_jobs(r.stdout + r.stderr))
    # the article embeds the figures: drawn again, it is written again (no number of it changes)
    assert planned == {"plot_spectra", "plot_dynamics", "plot_theory", "plot_steering", "provenance", "article",
                       "all"}, planned


def test_new_steering_targets_rerun_steering_only(test_run, tmp_path):
    cfg = yaml.safe_load((REPO / "config/test.yaml").read_text())
    cfg["models"]["tiny-gpt2"]["steering_targets"] = [{"kind": "random", "seed": 7}]
    (tmp_path / "targets.yaml").write_text(yaml.safe_dump(cfg))
    r = smk("-n", "--configfile", str(tmp_path / "targets.yaml"), "--directory", str(test_run), cwd=test_run)
    assert r.returncode == 0, r.stderr[-2000:]
    planned = planned_jobs(r.stdout + r.stderr)
    assert planned.get("steering") == 1, planned  # only tiny-gpt2's
    assert not {"fetch_model", "extract", "spectra", "dynamics"} & set(planned), planned


def test_a_claims_threshold_reruns_only_the_steps_that_read_it(test_run, tmp_path):
    """C5's threshold is read by the claims step alone: no dynamics, quantization, steering or plot job reruns
    (each step receives only the config keys it reads; the dynamics step, the per-layer readings' shares). C9's
    threshold is read by the steering step too (revision 6: kappa doubles until a target reaches it), and by no
    dynamics step."""
    cfg = patched_config(tmp_path, lambda c: c.setdefault("claims", {}).update(C5_consensus_abs_cos=0.95))
    r = smk("-n", "--configfile", str(cfg), "--directory", str(test_run), cwd=test_run)
    assert r.returncode == 0, r.stderr[-2000:]
    planned = set(planned_jobs(r.stdout + r.stderr))
    assert "claims" in planned, planned
    assert not {"fetch_model", "extract", "spectra", "dynamics", "quantization", "steering", "theory",
                "plot_dynamics", "plot_spectra", "plot_steering", "plot_theory"} & planned, planned
    cfg = patched_config(tmp_path, lambda c: c.setdefault("claims", {}).update(C9_alignment=0.8))
    r = smk("-n", "--configfile", str(cfg), "--directory", str(test_run), cwd=test_run)
    assert r.returncode == 0, r.stderr[-2000:]
    planned = set(planned_jobs(r.stdout + r.stderr))
    assert {"steering", "claims"} <= planned, planned
    assert not {"fetch_model", "extract", "spectra", "dynamics", "quantization", "theory"} & planned, planned


def test_new_label_reruns_only_what_shows_it(test_run, tmp_path):
    cfg = patched_config(tmp_path, lambda c: c["models"]["tiny-gpt2"].update(label="GPT-2 (tiny twin)"))
    r = smk("-n", "--configfile", str(cfg), "--directory", str(test_run), cwd=test_run)
    assert r.returncode == 0, r.stderr[-2000:]
    planned = planned_jobs(r.stdout + r.stderr)
    assert set(planned) <= {"plot_spectra", "plot_dynamics", "plot_steering", "table_quantization", "claims",
                            "table_models", "provenance", "speed", "article", "all"}, planned  # never the download
    # and the chain after it
    assert "plot_spectra" in planned


def test_rerun_has_nothing_to_do(test_run):
    r = smk("-n", "--cores", "2", "--configfile", str(REPO / "config/test.yaml"), "--directory", str(test_run),
            cwd=test_run)
    assert r.returncode == 0 and "Nothing to be done" in r.stdout + r.stderr


def test_paper_config_plans_all_13_checkpoints(tmp_path):
    """The 13 paper checkpoints, each with its 3 matched controls (paper.md section 4e, control_seeds): 52 models
    fetched, extracted and proven; steering for the 13 trained ones only (a control is judged on the dynamics)."""
    r = smk("-n", "--cores", "8", "--directory", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout + r.stderr
    assert "Using workflow specific profile" in out  # workflow/profiles/default, found through profiles/
    assert out.count("mem_mb=") >= 13 * 4 and out.count("runtime=") >= 13 * 4
    planned = planned_jobs(out)
    assert all(planned[rule] == 52 for rule in ("fetch_model", "extract", "check_extraction")), planned
    assert planned["steering"] == 13 and planned["dynamics"] == 104, planned
    assert "results/paper/gpt2-xl-control/manifest.json" in out
    assert "results/paper/gpt2-xl-control-3/manifest.json" in out


def test_building_the_dag_never_imports_torch(tmp_path):
    """Every Snakemake launch builds the DAG: with a `torch` that raises on import first on the path, the
    offline configs (a package, GGUF models, steering-target checks) and the twins' config still plan every
    job."""
    fake = tmp_path / "blocked" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("torch imported while building the DAG")\n')
    r = smk("-n", "--directory", str(tmp_path), "--configfile", str(REPO / "config/offline.yaml"),
            str(REPO / "config/offline-decoders.yaml"), cwd=tmp_path, env={"PYTHONPATH": str(fake.parent)})
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]
    # the 3 trained models and their 3 matched controls each: no twin in the default run
    assert "torch imported" not in r.stdout + r.stderr and planned_jobs(r.stdout + r.stderr)["fetch_model"] == 12
    r = smk("-n", "--directory", str(tmp_path / "twins"), "--configfile", str(REPO / "config/twins.yaml"),
            cwd=tmp_path, env={"PYTHONPATH": str(fake.parent)})
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]
    # the 4 architecture twins (ALBERT's shared layer, GPT-2's Conv1D, GPT-Neo), no control: random weights
    assert "torch imported" not in r.stdout + r.stderr and planned_jobs(r.stdout + r.stderr)["fetch_model"] == 4


#: The steps that run torch (the models, the attention law of the theory checks, the matrix-product peak of the
#: speed table) and those that also load transformers models; every other step imports neither.
TORCH_STEPS = {"fetch_model", "steering_targets", "extract", "check_extraction", "dynamics", "steering",
               "quantization", "theory", "speed"}
TRANSFORMERS_STEPS = TORCH_STEPS - {"theory", "speed"}


def _blocked(tmp_path, *names) -> str:
    for name in names:
        (tmp_path / "blocked" / name).mkdir(parents=True, exist_ok=True)
        (tmp_path / "blocked" / name / "__init__.py").write_text(f'raise ImportError("{name} imported")\n')
    return str(tmp_path / "blocked")


def test_steps_that_need_neither_torch_nor_transformers_load_neither(test_run, tmp_path):
    """Each step's first job of the test run, run again by its own command line (from `snakemake -n -p
    --forceall`) in a copy of the run with a `torch` and a `transformers` that raise on import: the spectra,
    the claims, the tables, the figures, the article and the bookkeeping steps pass; theory and speed pass with
    transformers blocked alone."""
    from powerlens.pipeline.steps import STEPS

    run = copied_run(test_run, tmp_path)
    r = smk("-n", "-p", "--forceall", "--configfile", str(REPO / "config/test.yaml"), cwd=run)
    first = {}
    for ln in (r.stdout + r.stderr).splitlines():
        if ln.startswith("Shell command:") and " -m powerlens " in ln:
            step = ln.split(" -m powerlens ")[1].split()[0]
            first.setdefault(step, ln.removeprefix("Shell command:").strip().rsplit(" > ", 1)[0])
    assert set(STEPS) - TRANSFORMERS_STEPS <= set(first), set(STEPS) - set(first)  # every step checked here runs
    both, tf_only = _blocked(tmp_path, "torch", "transformers"), _blocked(tmp_path / "tf", "transformers")
    for step, cmd in sorted(first.items()):
        if step in TRANSFORMERS_STEPS:
            continue
        path = tf_only if step in TORCH_STEPS else both
        p = subprocess.run(cmd, shell=True, cwd=run, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [path, os.environ.get(
                               "PYTHONPATH")]))})
        assert p.returncode == 0 and "imported" not in p.stderr, (step, p.stderr[-1500:])
    # the blocking works (a control): the extract step, which loads the model, stops on it
    p = subprocess.run(first["extract"], shell=True, cwd=run, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [both, os.environ.get(
                           "PYTHONPATH")]))})
    assert p.returncode != 0 and "torch imported" in p.stderr, p.stderr[-1500:]


def test_lint_is_clean(tmp_path):
    r = smk("--lint", cwd=REPO)
    assert r.returncode == 0 and "good condition" in r.stdout + r.stderr, r.stdout + r.stderr


BAD = {
    "misspelled key": ({"sead": 1}, None, "'sead' was unexpected"),
    "unknown architecture": ({}, {"arch": "mamba"}, "mamba"),
    "bad source": ({}, {"source": "ftp"}, "ftp"),
    "twin arch mismatch": ({}, {"arch": "gpt2"}, "models.tiny-bert.arch"),
    "seed out of range": ({"seed": 2**70}, None, "config value seed"),
    "impossible tolerance": ({"extraction_check": {"tol_float32": 1e-30}}, None, "unit round-off"),
    "embedding target without a token": ({}, {"steering_targets": [{"kind": "embedding"}]}, "'token' is a required"),
    "target token split": ({}, {"steering_targets": [{"kind": "embedding", "token": "the"}]}, "splits the token"),
}


def bad_config(tmp_path, case) -> Path:
    top, model_patch, _ = BAD[case]

    def patch(cfg):
        cfg.update(top)
        if model_patch:
            cfg["models"]["tiny-bert"].update(model_patch)

    return patched_config(tmp_path, patch, "bad.yaml")


@pytest.mark.parametrize("case", list(BAD))
def test_bad_config_is_named_with_its_fix(tmp_path, case):
    """Each user error is found by the checks Snakemake runs while it builds the DAG (the same two calls as
    workflow/rules/common.smk, here in-process): a problem that names it and a fix."""
    from powerlens.core.errors import PowerlensError
    from powerlens.pipeline.config import check_targets_on_disk, validate_config

    path = bad_config(tmp_path, case)
    cfg = yaml.safe_load(path.read_text())
    with pytest.raises(PowerlensError) as e:
        validate_config(cfg, [str(path)])
        check_targets_on_disk(cfg, lambda m: tmp_path / "results" / m / "manifest.json")
    assert BAD[case][2] in f"{e.value.problem} {e.value.fix}" and e.value.fix, (e.value.problem, e.value.fix)


def test_bad_config_stops_snakemake_before_any_work(tmp_path):
    """One launch: the last check made while the DAG is built (a target token the tokenizer splits) stops
    Snakemake with problem + fix, exit status 2, no traceback and no job."""
    cfg = bad_config(tmp_path, "target token split")
    r = smk("--cores", "1", "--configfile", str(cfg), "--directory", str(tmp_path), cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 2, out[-2000:]
    assert "splits the token" in out and "ERROR: " in out and "  fix: " in out and "Traceback" not in out, out[-2000:]
    assert out.count("ERROR: ") == 1
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()


def test_unreachable_hub_stops_at_once_with_one_summary(tmp_path):
    """The default (paper) config with the hub unreachable (a loopback port nobody listens on): one
    connectivity check before any job, one problem + fix naming the ways out, exit status 2."""
    import socket
    import time

    with socket.socket() as s:  # a free port, then closed: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_HOME": str(tmp_path / "hf")}
    t0 = time.monotonic()
    r = smk("--cores", "2", "--directory", str(tmp_path), cwd=tmp_path, env=env, timeout=120)
    took = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode == 2, out[-3000:]
    assert out.count("ERROR: ") == 1 and "unreachable" in out and "13 model(s)" in out, out[-3000:]
    assert "config/offline.yaml" in out and "Error in rule" not in out and "Traceback" not in out
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()
    print(f"stopped after {took:.1f} s")  # measured figure for the notes, not a timed assertion


def test_step_user_error_ends_the_run_with_its_message_and_status_2(tmp_path):
    """A user error found inside a step (here: a local folder without config.json) is repeated once at the
    end of Snakemake's output, and the run exits with status 2."""
    (tmp_path / "empty").mkdir()
    cfg = {"run": "bad", "models": {"x": {"arch": "bert", "source": "local", "path": str(tmp_path / "empty")}}}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(cfg))
    r = smk("--cores", "1", "--configfile", str(tmp_path / "bad.yaml"), "--directory", str(tmp_path), cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 2, out[-2000:]
    tail = out[out.rindex("problem(s) to fix"):]
    assert "has no config.json" in tail and "fix: point `path`" in tail
    assert out.count("Error in rule fetch_model") == 1  # no retry of an error that cannot change


def _fetched_local_bert(tmp_path):
    """A tiny BERT twin's folder copied to a user's folder, given to a run as `source: local` and fetched by
    Snakemake: (the folder, the manifest target, the snakemake arguments)."""
    from powerlens.pipeline.steps.fetch_model import fetch_model

    rec = fetch_model("src", {"arch": "bert", "source": "random", "twin_of": "tiny-bert", "seed": 0},
                      tmp_path / "src.json")
    mine = tmp_path / "mine"
    shutil.copytree(rec["path"], mine)
    cfg = {"run": "loc", "models": {"mine": {"arch": "bert", "source": "local", "path": str(mine)}}}
    (tmp_path / "loc.yaml").write_text(yaml.safe_dump(cfg))
    target = "results/loc/mine/manifest.json"
    args = (target, "--configfile", str(tmp_path / "loc.yaml"), "--directory", str(tmp_path))
    r = smk("--cores", "1", *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    return mine, target, args


def test_local_model_saved_again_reruns_its_chain(tmp_path):
    """A local model re-saved in place (new weights) is newer than its manifest: its fetch step and so its
    whole chain re-run; until then, loading says the files changed and never suggests deleting them."""
    from powerlens.core.errors import PowerlensError
    from powerlens.core.io import read_json
    from powerlens.models.sources import load_model
    from powerlens.pipeline.steps.fetch_model import fetch_model

    mine, target, _ = _fetched_local_bert(tmp_path)
    other = fetch_model("src", {"arch": "bert", "source": "random", "twin_of": "tiny-bert", "seed": 1},
                        tmp_path / "other.json")
    shutil.copy(Path(other["path"]) / "model.safetensors", mine / "model.safetensors")  # saved again
    later = (tmp_path / target).stat().st_mtime + 10  # saved after the fetch, whatever the clock's resolution
    os.utime(mine / "model.safetensors", (later, later))
    with pytest.raises(PowerlensError) as e:
        load_model(read_json(tmp_path / target))
    assert "changed after the fetch step" in e.value.fix and "delete" not in str(e.value).lower()
    r = smk("-n", target, "--configfile", str(tmp_path / "loc.yaml"), "--directory", str(tmp_path), cwd=tmp_path)
    assert planned_jobs(r.stdout + r.stderr).get("fetch_model") == 1, r.stdout[-2000:]


def test_a_local_model_saved_again_with_its_old_date_still_reruns(tmp_path):
    """#69: weights re-saved in place with their old modification time put back (`touch -d`) reran nothing and
    the report built from the old weights. The fetch step carries the files' content as a param; a copy with
    the same content (new dates) plans nothing."""
    from powerlens.pipeline.steps.fetch_model import fetch_model

    mine, target, args = _fetched_local_bert(tmp_path)
    weights = mine / "model.safetensors"
    st = weights.stat()
    shutil.copy(weights, tmp_path / "same.safetensors")
    shutil.copy(tmp_path / "same.safetensors", weights)  # the same bytes written again, the old date put back
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = smk("-n", *args, cwd=tmp_path)
    out = r.stdout + r.stderr
    assert "Nothing to be done" in out or "fetch_model" not in planned_jobs(out), out[-2000:]
    other = fetch_model("src", {"arch": "bert", "source": "random", "twin_of": "tiny-bert", "seed": 1},
                        tmp_path / "other.json")
    shutil.copy(Path(other["path"]) / "model.safetensors", weights)  # other weights ...
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... with the old date put back
    r = smk("-n", *args, cwd=tmp_path)
    assert planned_jobs(r.stdout + r.stderr).get("fetch_model") == 1, r.stdout[-2000:]


def test_readme_audit_example_runs_as_printed(tmp_path):
    """The README's "Auditing one step" commands, line by line as printed, in a folder that looks like a
    checkout (links to the repository's files and to this interpreter's environment)."""
    import re

    text = (REPO / "README.md").read_text()
    block = next(b for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S) if "extraction_check.json" in b)
    for name in ("Snakefile", "config", "workflow", "scripts", "profiles", "src"):
        (tmp_path / name).symlink_to(REPO / name)
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])
    outs = []
    for line in block.splitlines():
        cmd = line.split("#")[0].strip()
        if not cmd:
            continue
        r = subprocess.run(cmd, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, (cmd, r.stdout[-2000:], r.stderr[-2000:])
        outs.append(r.stdout)
    check = json.loads((tmp_path / "results/twins/gpt2-twin/extraction_check.json").read_text())
    assert all(0 <= c["max_abs_error"] <= c["tolerance"] for c in check["checks"].values())
    assert "float64" in outs[1] and "max_rss" in outs[2]  # the log and the benchmark the README points at


def test_every_markdown_table_renders_with_its_columns(test_run):
    """Each table's Markdown (read back by a Markdown parser), HTML and LaTeX forms hold its CSV's cells, row by
    row (an unescaped | in a Markdown cell, as in |cos|, splits it and the renderer drops the cells beyond the
    header's count)."""
    from ..unit.test_tables_for_readers import same_cells_in_every_form

    csvs = sorted((test_run / "paper_tables/test").glob("*.csv"))
    assert len(csvs) == len(TABLES), csvs
    for csv in csvs:
        same_cells_in_every_form(csv)


def test_no_table_prints_nan_or_none(test_run):
    """No literal nan / None / empty cell in any form of any table: a missing value is a dash whose reason is a
    footnote of the table."""
    import re

    for csv in sorted((test_run / "paper_tables/test").glob("*.csv")):
        df = pd.read_csv(csv, keep_default_na=False, dtype=str)
        bad = [(c, v) for c in df.columns for v in df[c] if v.strip().lower() in ("nan", "none", "")]
        assert not bad, (csv.name, bad[:5])
        for ext in (".md", ".html", ".tex"):
            text = csv.with_suffix(ext).read_text()
            assert not re.search(r"(?<![A-Za-z_])(nan|None)(?![A-Za-z_])", text), (csv.name, ext)


def test_theory_and_claims_tables_cannot_disagree(test_run):
    """C2, C3 and C4: table_theory's verdict rows, table_claims' verdicts and the verdict view agree."""
    d = test_run / "paper_tables/test"
    th = pd.read_csv(d / "table_theory.csv", keep_default_na=False).set_index("case")
    cl = pd.read_csv(d / "table_claims.csv", keep_default_na=False)
    view = pd.read_csv(d / "table_claim_verdicts.csv", keep_default_na=False).set_index("claim")
    import re

    def word_and_part(cell: str) -> str:  # a view cell less its p values and robustness count
        return re.sub(r" \((claim p|attainable p)[^)]*\)", "", cell).split(" [")[0]

    for claim in ("C2", "C3", "C4"):
        row = cl[(cl["claim"] == claim) & (cl["family"] == "synthetic")].iloc[0]
        verdict = row["verdict"] + ("" if row["verdict"] == "reproduced" else f": {row['failed part']}")
        assert th.loc[f"{claim} verdict", "check"] == verdict, claim
        assert word_and_part(view.loc[claim, "synthetic layers"]) == verdict, claim
    for _, row in cl[cl["family"] != "synthetic"].iterrows():
        if row["family"] in view.columns:
            want = row["verdict"] + ("" if row["verdict"] == "reproduced" else f": {row['failed part']}")
            assert word_and_part(view.loc[row["claim"], row["family"]]) == want, (row["claim"], row["family"])


def test_latex_tables_compile(test_run, tmp_path):
    """Every .tex table compiles in a minimal document (booktabs) with pdflatex, where a TeX distribution is
    installed (Debian: texlive-latex-base and texlive-latex-recommended)."""
    pdflatex = shutil.which("pdflatex")
    if not pdflatex:
        pytest.skip("pdflatex is not installed (Debian: apt-get install texlive-latex-base "
                    "texlive-latex-recommended); the LaTeX tables were not compiled")
    for tex in sorted((test_run / "paper_tables/test").glob("*.tex")):
        doc = tmp_path / f"{tex.stem}_doc.tex"
        doc.write_text("\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage[utf8]{inputenc}\n"
                       "\\usepackage{booktabs}\n\\begin{document}\n\\input{" + str(tex) + "}\n\\end{document}\n")
        r = subprocess.run([pdflatex, "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (tex.name, r.stdout[-1500:])
