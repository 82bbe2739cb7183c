"""Job resources fitted from measured benchmark files (powerlens.pipeline.resources, scripts/fit_resources.py)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from powerlens.models.archs import PAPER_MODELS, TINY_MODELS, twin_config
from powerlens.pipeline.resource_fit import fit, fit_line
from powerlens.pipeline.resources import MARGIN, RULES, load_coefficients, predict, size_of

REPO = Path(__file__).resolve().parents[2]
MEASURED = REPO / "workflow/resources_measured.tsv"
FITTED = REPO / "workflow/resources.yaml"


@pytest.mark.parametrize("name", list(TINY_MODELS))
def test_size_terms_match_the_built_model(name):
    import transformers

    arch = twin_config(name)
    model = transformers.AutoModel.from_config(arch.hf_config())
    s = size_of(arch)
    assert s.params == sum(p.numel() for p in model.parameters())
    # forward_params: every parameter a token meets per layer, times the depth (ALBERT's shared layer too)
    from powerlens.models.adapters import get_adapter

    unique = {id(m): m for m in get_adapter(arch.arch).layer_modules(model)}.values()
    per_layer = sum(p.numel() for m in unique for p in m.parameters()) // s.n_unique_layers
    assert s.forward_params == per_layer * s.n_layers
    assert s.n_unique_layers == (1 if arch.arch == "albert" else s.n_layers)


def test_albert_counts_its_shared_layer_once_in_params_but_per_depth_in_work():
    s = size_of(PAPER_MODELS["albert-xxlarge-v2"])
    assert s.params < 0.25e9 and s.forward_params > 2.4e9  # 223M stored, 12 x 0.2B per token


def test_fit_line_recovers_a_line_and_stays_non_negative():
    x = np.array([1e6, 5e7, 1e8, 2e9])
    a, b = fit_line(x, 300 + 4e-6 * x)
    assert a == pytest.approx(300, rel=1e-6) and b == pytest.approx(4e-6, rel=1e-6)
    a, b = fit_line(x, 1000 - 1e-7 * x)  # a falling line: slope clipped at 0, raised to cover every point
    assert b == 0 and a >= 1000 - 1e-7 * x[0] - 1e-9
    y = np.array([100.0, 900.0, 200.0, 5000.0])  # scattered: the line ends above every point
    a, b = fit_line(x, y)
    assert np.all(a + b * x >= y * (1 - 1e-12))


def test_predict_applies_the_margin():
    c = {"spectra": {"mem_mb": {"a": 1000.0, "b": 0.0}, "runtime_s": {"a": 600.0, "b": 0.0}}}
    r = predict(c, "spectra", 1, 0.0)
    fm, am = MARGIN["mem_mb"]
    ft, at = MARGIN["runtime_s"]
    assert r["mem_mb"] >= fm * 1000 + am and r["runtime"] == int(np.ceil((ft * 600 + at) / 60))


def test_stored_fit_is_the_fit_of_the_stored_measurements():
    df = pd.read_csv(MEASURED, sep="\t")
    stored = load_coefficients(FITTED)
    refit = fit(df.to_dict("records"))
    assert set(stored) == set(refit) == set(RULES)
    for rule in RULES:
        for key in ("mem_mb", "runtime_s"):
            for k in ("a", "b"):
                assert stored[rule][key][k] == pytest.approx(refit[rule][key][k], rel=1e-9, abs=1e-12), (rule, key)


def test_fitted_resources_cover_every_measured_job():
    df = pd.read_csv(MEASURED, sep="\t")
    coeffs = load_coefficients(FITTED)
    assert df["run"].str.startswith("bench").any(), "the fit must include the large-twin benchmark (scripts/bench.py)"
    for r in df.to_dict("records"):
        p = predict(coeffs, r["rule"], r["mem_term"], r["time_term"])
        assert p["mem_mb"] >= r["max_rss_mb"], r
        assert p["runtime"] * 60 >= r["s"], r


def test_every_heavy_rule_uses_the_fitted_resources():
    text = "".join(p.read_text() for p in (REPO / "workflow/rules").glob("*.smk"))
    for rule in ("fetch_model", "extract", "check_extraction", "spectra", "dynamics", "steering"):
        assert f'mem_mb=fitted("{rule}", "mem_mb")' in text and f'runtime=fitted("{rule}", "runtime")' in text
    assert yaml.safe_load(FITTED.read_text())["fitted_on"]["rows"] == len(pd.read_csv(MEASURED, sep="\t"))


def test_long_shared_weight_runs_enter_time_and_memory():
    """`dynamics.steps` (up to the schema's 100000) is part of the attention-only request of shared-weight
    models: at 100000 steps tiny-albert asks for more than the 12.6 min and about 1 GB it was seen to take
    (runtime 3 min and 1.8 GB before); models without shared weights are unaffected."""
    from snakemake.utils import validate

    from powerlens.core.corpus import read_prompts
    from powerlens.pipeline.resources import job_terms, long_run_extra

    cfg = yaml.safe_load((REPO / "config/test.yaml").read_text())
    validate(cfg, str(REPO / "workflow/schemas/config.schema.yaml"))
    prompts = read_prompts(REPO / cfg["prompts"])
    coeffs = load_coefficients(FITTED)

    def request(model, steps):
        cfg["dynamics"]["steps"] = steps
        mem, term = job_terms(cfg, model, prompts)["dynamics_attention-only"]
        return predict(coeffs, "dynamics_attention-only", mem, term, long_run_extra(cfg, model, prompts))

    short, long = request("tiny-albert", 200), request("tiny-albert", 100_000)
    assert long["runtime"] >= 13 and long["mem_mb"] >= 1000 and long["mem_mb"] > short["mem_mb"], (short, long)
    assert request("tiny-bert", 200) == request("tiny-bert", 100_000)
    assert long_run_extra(cfg, "tiny-bert", prompts) == (0.0, 0.0)


def test_stored_steering_terms_are_the_current_definition():
    """The steering rows of the runs whose configs ship with the repository carry the time term that
    powerlens.pipeline.resources computes today (scripts/fit_resources.py --retime after a change of the term)."""
    from powerlens.core.corpus import read_prompts
    from powerlens.pipeline.config import validate_config
    from powerlens.pipeline.resources import job_terms

    df = pd.read_csv(MEASURED, sep="\t")
    checked = 0
    for run, path in (("test", "config/test.yaml"), ("offline", "config/offline.yaml")):
        cfg = yaml.safe_load((REPO / path).read_text())
        validate_config(cfg)
        if run == "offline":  # measured when the twins ran inside the offline run: their entries, same settings
            cfg["models"].update(yaml.safe_load((REPO / "config/twins.yaml").read_text())["models"])
        prompts = read_prompts(REPO / cfg["prompts"])
        for r in df[(df["run"] == run) & (df["rule"] == "steering")].to_dict("records"):
            assert r["time_term"] == pytest.approx(job_terms(cfg, r["model"], prompts)["steering"][1], rel=1e-5), r
            checked += 1
    assert checked >= 8


def test_steering_work_counts_what_the_step_runs():
    """A shared layer edited at every depth re-runs the whole stack per setting; at its last depth only (or
    for any other model) one whole pass, then the last depth; the eigen-checks grow with targets x kappas."""
    from powerlens.pipeline.resources import STEERING_COSTS, steering_work

    alb, gpt = size_of(PAPER_MODELS["albert-xxlarge-v2"]), size_of(PAPER_MODELS["gpt2-xl"])
    kw = {"tokens": 1000, "kappas": [0, 1, 4], "targets": 2}
    every, last = (steering_work(alb, shared_edit=s, **kw) for s in ("every_depth", "last_depth"))
    assert every > 3 * last
    assert steering_work(gpt, shared_edit="every_depth", **kw) == steering_work(gpt, shared_edit="last_depth", **kw)
    # no tokens: only the eigen-checks (kappa 0 once, 2 targets x 2 non-zero kappas), the least-squares z per
    # target and the SVD remain
    c = STEERING_COSTS
    assert steering_work(gpt, tokens=0, kappas=[0, 1, 4], targets=2, shared_edit="every_depth") == pytest.approx(
        gpt.d_model ** 3 * (5 * c["eig_d3"] + 2 * c["lstsq_d3"] + c["svd_d3"]))
    assert steering_work(gpt, shared_edit="every_depth", **{**kw, "targets": 3}) > steering_work(
        gpt, shared_edit="every_depth", **kw)
