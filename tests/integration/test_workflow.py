"""Snakemake end to end on the tiny-twin config, the paper config's plan, lint, and bad configs."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ..conftest import REPO

pytestmark = pytest.mark.integration
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]


def smk(*args, cwd, env=None, timeout=600):
    return subprocess.run(SNAKEMAKE + list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def test_run(tmp_path_factory):
    """Run the whole DAG on config/test.yaml in a scratch directory (once for this module)."""
    work = tmp_path_factory.mktemp("run")
    r = smk("--cores", "2", "--configfile", str(REPO / "config/test.yaml"), "--directory", str(work), cwd=work)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return work


def test_end_to_end_outputs(test_run):
    res = test_run / "results/test"
    for m in ("tiny-albert", "tiny-bert", "tiny-gpt2", "tiny-gpt-neo", "tiny-gemma3"):
        check = json.loads((res / m / "extraction_check.json").read_text())
        assert check["passed"] and check["checks"]["float64"]["max_abs_error"] < 1e-10
        meta = json.loads((res / m / "weights.json").read_text())
        assert meta["weights_label"] == "random weights" and meta["random_weights"] is True
        assert (test_run / f"logs/test/extract_weights/{m}.log").exists()
        assert (test_run / f"benchmarks/test/extract_weights/{m}.tsv").exists()
    assert json.loads((res / "tiny-albert/extraction_check.json").read_text())["albert_single_F"]
    lock = yaml.safe_load((res / "models.lock.yaml").read_text())
    assert set(lock["models"]) == {"tiny-albert", "tiny-bert", "tiny-gpt2", "tiny-gpt-neo", "tiny-gemma3"}
    md = (test_run / "paper_tables/test/table_models.md").read_text()
    assert md.count("random weights") == 5
    for ext in ("csv", "tex"):
        assert (test_run / f"paper_tables/test/table_models.{ext}").stat().st_size > 0


def test_spectra_outputs_and_byte_identical_rerun(test_run):
    tables = [test_run / f"paper_tables/test/table_spectra.{e}" for e in ("csv", "md", "tex")]
    per_model = sorted((test_run / "results/test").glob("*/spectra.csv"))
    assert len(per_model) == 5
    before = [p.read_bytes() for p in tables + per_model]
    for f in ("fig_spectra", "fig_gap"):
        for e in ("pdf", "png"):
            assert (test_run / f"figures/test/{f}.{e}").stat().st_size > 1000
    assert tables[1].read_text().count("random weights") == 5
    arrays = sorted((test_run / "results/test").glob("*/spectra.npz"))
    times = {p: (p.stat().st_atime_ns, p.stat().st_mtime_ns) for p in per_model + arrays}
    # only the spectra and their table and figure are redone (a bare --forcerun would redo all downstream)
    r = smk("--cores", "2", "--configfile", str(REPO / "config/test.yaml"), "--directory", str(test_run),
            "--forcerun", "spectra", "plot_spectra", "--", "paper_tables/test/table_spectra.csv",
            "figures/test/fig_spectra.png", cwd=test_run)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (r.stdout + r.stderr).count("rule spectra:") == len(per_model)
    assert [p.read_bytes() for p in tables + per_model] == before
    for p, (a, m) in times.items():  # byte-identical outputs: their old times keep everything downstream current
        os.utime(p, ns=(a, m))


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
                      f"{stat}_p_holm"]].notna().all().all()
        assert (d[f"rho_p"] >= 1 / 2001).all()  # Monte Carlo p with R = 2000 draws
    meta = json.loads((test_run / "results/test/tiny-gpt2/dynamics-model.json").read_text())
    assert meta["n_prompts"] == 24 and meta["n_tokens"] > 0 and meta["random_weights"]
    th = pd.read_csv(test_run / "paper_tables/test/table_theory.csv")
    full = th[th["attention"] == "full"]
    assert (full["verdict"] == "pass").all() and len(full) == 3
    st = pd.read_csv(test_run / "paper_tables/test/table_steering.csv")
    assert set(st["model"]) == {"tiny-albert", "tiny-bert", "tiny-gpt2", "tiny-gpt-neo", "tiny-gemma3"}
    for m in ("tiny-albert", "tiny-bert", "tiny-gpt2", "tiny-gpt-neo", "tiny-gemma3"):
        sj = json.loads((test_run / f"results/test/{m}/steering.json").read_text())
        assert sj["checksum_before"] == sj["checksum_after"]
    for f in ("fig_gamma", "fig_rho", "fig_albert_consensus", "fig_albert_rotation", "fig_theory", "fig_steering"):
        assert (test_run / f"figures/test/{f}.png").stat().st_size > 1000
    # greedy continuations: the causal LMs with a token target at every kappa; none for encoders
    c = pd.read_csv(test_run / "results/test/tiny-gemma3/steering_continuations.csv", keep_default_na=False)
    assert sorted(set(c["kappa"])) == [0, 4, 64] and set(c["prompt"]) == {"The cat"}
    assert len(pd.read_csv(test_run / "results/test/tiny-bert/steering_continuations.csv")) == 0
    ct = pd.read_csv(test_run / "paper_tables/test/table_continuations.csv", keep_default_na=False)
    assert set(ct["model"]) == {"tiny-gpt2", "tiny-gpt-neo", "tiny-gemma3"}  # the causal LMs
    assert (ct["model"] == "tiny-gemma3").sum() == 3  # one token target x three kappas x one prompt


FIGURES = ["fig_spectra", "fig_gap", "fig_gamma", "fig_rho", "fig_albert_consensus", "fig_albert_rotation",
           "fig_theory", "fig_steering"]
TABLES = ["table_claims", "table_models", "table_spectra", "table_alignment", "table_theory", "table_steering",
          "table_continuations", "table_quantization"]


def test_report_in_headless_chromium(test_run):
    """The HTML report loads in a real browser without console errors and holds every figure and table."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    assert Path(chromium).exists(), "Debian's chromium is needed: apt-get install chromium (.ci/run does it)"
    report = test_run / "results/test/report.html"
    r = smk("--configfile", str(REPO / "config/test.yaml"), "--directory", str(test_run), "--report", str(report),
            cwd=test_run)
    assert r.returncode == 0, r.stderr[-2000:]
    artifacts = REPO / "tests/artifacts"
    artifacts.mkdir(exist_ok=True)
    errors = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(report.as_uri())
        page.wait_for_timeout(1500)
        body = page.inner_text("body")
        html = page.content()
        page.screenshot(path=str(artifacts / "report.png"))
        page.get_by_text("1 Claims").first.click()
        page.wait_for_timeout(800)
        page.screenshot(path=str(artifacts / "report_claims.png"))
        browser.close()
    assert errors == [], errors
    assert "Modelling choices" in body and "1 Claims" in body
    for name in FIGURES:
        assert f"{name}.png" in html and f"{name}.pdf" in html, name
    for name in TABLES:
        assert f"{name}.csv" in html, name


def test_plot_option_recomputes_no_numbers(test_run, tmp_path):
    cfg = (REPO / "config/test.yaml").read_text() + "plot: {dpi: 120}\n"
    (tmp_path / "dpi.yaml").write_text(cfg)
    r = smk("-n", "--configfile", str(tmp_path / "dpi.yaml"), "--directory", str(test_run), cwd=test_run)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout + r.stderr
    planned = set()
    for ln in out[out.index("Job stats"):].splitlines()[3:]:
        if not ln.split() or ln.split()[0] == "total":
            break
        planned.add(ln.split()[0])
    assert planned == {"plot_spectra", "plot_dynamics", "plot_theory", "plot_steering", "provenance", "all"}, planned


def test_new_steering_targets_rerun_steering_only(test_run, tmp_path):
    cfg = yaml.safe_load((REPO / "config/test.yaml").read_text())
    cfg["models"]["tiny-gpt2"]["steering_targets"] = [{"kind": "random", "seed": 7}]
    (tmp_path / "targets.yaml").write_text(yaml.safe_dump(cfg))
    r = smk("-n", "--configfile", str(tmp_path / "targets.yaml"), "--directory", str(test_run), cwd=test_run)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout + r.stderr
    planned = {}
    for ln in out[out.index("Job stats"):].splitlines()[3:]:
        if not ln.split() or ln.split()[0] == "total":
            break
        planned[ln.split()[0]] = int(ln.split()[1])
    assert planned.get("steering") == 1, planned  # only tiny-gpt2's
    assert not {"fetch_model", "extract_weights", "spectra", "dynamics"} & set(planned), planned


def test_rerun_has_nothing_to_do(test_run):
    r = smk("-n", "--cores", "2", "--configfile", str(REPO / "config/test.yaml"), "--directory", str(test_run),
            cwd=test_run)
    assert r.returncode == 0 and "Nothing to be done" in r.stdout + r.stderr


def test_paper_config_plans_all_13_checkpoints(tmp_path):
    r = smk("-n", "--cores", "8", "--directory", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout + r.stderr
    assert "Using workflow specific profile" in out  # workflow/profiles/default, found through profiles/
    assert out.count("mem_mb=") >= 13 * 4 and out.count("runtime=") >= 13 * 4
    for rule in ("fetch_model", "extract_weights", "check_extraction"):
        line = next(ln for ln in out.splitlines() if ln.split() and ln.split()[0] == rule)
        assert line.split()[1] == "13", line


def test_lint_is_clean(tmp_path):
    r = smk("--lint", cwd=REPO)
    assert r.returncode == 0 and "good condition" in r.stdout + r.stderr, r.stdout + r.stderr


BAD = {
    "misspelled key": ({"sead": 1}, None, "sead"),
    "unknown architecture": ({}, {"arch": "mamba"}, "mamba"),
    "bad source": ({}, {"source": "ftp"}, "ftp"),
    "twin arch mismatch": ({}, {"arch": "gpt2"}, "models.tiny-bert.arch"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_config_stops_before_any_work(tmp_path, case):
    top, model_patch, needle = BAD[case]
    cfg = yaml.safe_load((REPO / "config/test.yaml").read_text())
    cfg.update(top)
    if model_patch:
        cfg["models"]["tiny-bert"].update(model_patch)
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(cfg))
    r = smk("--cores", "1", "--configfile", str(tmp_path / "bad.yaml"), "--directory", str(tmp_path), cwd=tmp_path)
    assert r.returncode != 0
    assert needle in r.stdout + r.stderr
    assert not (tmp_path / "results").exists()


def test_unreachable_hub_message(tmp_path):
    cfg = {"run": "hub", "models": {"gpt2": {"arch": "gpt2", "source": "hf", "repo_id": "openai-community/gpt2"}}}
    (tmp_path / "hub.yaml").write_text(yaml.safe_dump(cfg))
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")}
    r = smk("--cores", "1", "--configfile", str(tmp_path / "hub.yaml"), "--directory", str(tmp_path),
            "--retries", "0", cwd=tmp_path, env=env, timeout=120)
    assert r.returncode != 0
    log = (tmp_path / "logs/hub/fetch_model/gpt2.log").read_text()
    assert "cannot reach the Hugging Face hub" in log and "config/offline.yaml" in log
    assert not (tmp_path / "results/hub/gpt2/manifest.json").exists()
