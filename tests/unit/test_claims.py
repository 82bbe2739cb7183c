"""Claim criteria of paper.md section 4b on constructed cases where the right verdict is known."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from powerlens.analysis import claims
from powerlens.analysis.dynamics import layer_directions, layer_stats, null_sets, run_attention_only
from powerlens.analysis.spectra import layer_spectrum, spectra_arrays
from powerlens.core.corpus import batches
from powerlens.models.weights import LayerWeights, ModelWeights

from ..conftest import REPO

CRIT = {"C1_share_layers": 0.5, "C5_consensus_abs_cos": 0.99, "C5_null_quantile": 0.99, "C6_weak_below": 0.5,
        "C7_share_layers": 0.5, "C9_alignment": 0.9, "C10_ffn_negative_below": 0.25, "alpha": 0.05}


def shared_layer(F: np.ndarray, b_O: np.ndarray) -> ModelWeights:
    """One shared layer with W_O W_V = F, uniform attention (W_Q = W_K = 0) and an output bias b_O."""
    d = F.shape[0]
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    z = torch.zeros(d, d, dtype=torch.float64)
    zero = torch.zeros(d, dtype=torch.float64)
    lw = LayerWeights(W_Q=z, W_K=z, W_V=t(np.eye(d)), W_O=t(F), b_Q=zero, b_K=zero, b_V=zero, b_O=t(b_O),
                      ln_w=torch.ones(d, dtype=torch.float64), ln_b=zero, ln_eps=1e-5, attn_scale=1.0)
    return ModelWeights(arch="albert", norm="post", causal=False, d_model=d, n_heads=2, layers=[lw], layer_map=[0] * 4)


def run_shared(F, b_O, X0, tokens_per_prompt, steps, seed=0):
    w = shared_layer(F, b_O)
    z = spectra_arrays([layer_spectrum(F, k=4, rng=np.random.default_rng(seed))], [0])
    dirs = layer_directions(z, seed)
    ids = [list(range(s, s + tokens_per_prompt)) for s in range(0, X0.shape[0], tokens_per_prompt)]
    bs = batches(ids, [[0] * len(i) for i in ids], batch_size=64, pad_id=0)
    E = torch.tensor(X0)
    arr = run_attention_only(lambda idx: E[idx], w, dirs, bs, steps, len(ids), null_sets(F.shape[0], dirs, 2000,
                             seed, "cpu"), progress=False)
    return layer_stats(arr, dirs), z


def test_bias_only_consensus_fails_c5():
    """A random F with |1 + lambda_1| about 0.11 plus a bias of norm 3: the tokens reach consensus, but on the
    bias, not on span(v_1, v_2) of M: C5's consensus part holds, its alignment part (against the null's q99)
    does not, so the verdict fails (the old criterion, consensus alone, passed it)."""
    rng = np.random.default_rng(0)
    d = 32
    G = rng.standard_normal((d, d)) / math.sqrt(d)
    F = -np.eye(d) + 0.11 * G / np.max(np.abs(np.linalg.eigvals(G)))  # M = I + F has spectral radius 0.11
    b = rng.standard_normal(d)
    b *= 3.0 / np.linalg.norm(b)
    df, _ = run_shared(F, b, rng.standard_normal((160, d)), tokens_per_prompt=8, steps=60)
    final = df.iloc[-1]
    assert final["pairwise_abs_cos"] > 0.99  # consensus...
    ok, measured, null, *_ = claims.c5(final, final["leading_type"], None, CRIT)
    assert not ok, measured  # ...but not on M's leading subspace
    assert final["span_M_final"] <= final["span_M_final_null_q99"]


def test_c5_passes_consensus_on_the_leading_direction():
    rng = np.random.default_rng(1)
    d = 32
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    F = Q @ np.diag(np.concatenate([[4.0, 2.0], rng.uniform(-0.3, 0.3, d - 2)])) @ Q.T
    X0 = rng.standard_normal((160, d)) + 2.0 * Q[:, 0]
    df, _ = run_shared(F, np.zeros(d), X0, tokens_per_prompt=8, steps=40)
    final = df.iloc[-1]
    ok, measured, *_ = claims.c5(final, final["leading_type"], "base", CRIT)
    assert ok, measured
    ok, measured, *_ = claims.c5(final, final["leading_type"], "xxlarge", CRIT)  # expects a complex lead
    assert not ok and "expected complex" in measured


def test_complex_pair_layer_does_not_count_as_ratio_one_in_c8():
    """A complex leading pair has |lambda_2| = |lambda_1| by conjugacy: the pair convention's ratio is 1.
    C8 uses the first eigenvalue beyond the pair."""
    rng = np.random.default_rng(2)
    from powerlens.analysis.theory import prescribed_matrix

    F = prescribed_matrix(12, [2.0 * np.exp(0.7j), 1.0], rest_radius=0.3, rng=rng)
    s = layer_spectrum(F, k=4).summary()
    assert s["leading_type"] == "complex pair" and s["ratio"] == pytest.approx(1.0)
    assert s["ratio_next"] == pytest.approx(0.5, rel=1e-8)
    # layers whose pair ratio is 1 everywhere but whose gap beyond the pair tracks gamma: C8 sees it
    L = 8
    ratio_next = np.linspace(0.9, 0.2, L)
    spec = pd.DataFrame({"layer": range(L), "ratio": 1.0, "ratio_next": ratio_next})
    dyn = pd.DataFrame({"layer": range(L), "gamma": 0.1 + 0.3 * (1 - ratio_next), "gamma_null_median": 0.05,
                        "rho_p_holm": 0.5})
    ok, measured, *_ = claims.c8(spec, dyn, 0.05)
    assert ok, measured
    dyn["gamma"] = 0.1 + 0.3 * ratio_next  # anti-correlated: not reproduced
    assert not claims.c8(spec, dyn, 0.05)[0]


def test_spec_copy_is_the_shared_spec():
    shared = REPO.parent / "shared" / "paper.md"
    if not shared.is_file():
        pytest.skip("../shared/paper.md is not beside this checkout")
    assert (REPO / "docs" / "paper.md").read_text() == shared.read_text()
    text = shared.read_text()
    assert "Revision 4" in text


def test_config_claims_block_holds_the_section_4b_criteria():
    import yaml

    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    props = schema["properties"]["claims"]["properties"]
    assert set(props) == {"C1_share_layers", "C5_consensus_abs_cos", "C5_null_quantile", "C6_weak_below",
                          "C7_share_layers", "C9_alignment", "C10_ffn_negative_below"}
    assert {k: v["default"] for k, v in props.items()} == {k: v for k, v in CRIT.items() if k != "alpha"}
    assert schema["properties"]["dynamics"]["properties"]["null_draws"]["minimum"] >= 2000


# --- revision 3 criteria (paper.md section 4b): each case passed under revision 2's code and fails now ---

def _layers(L=12, **cols):
    """A constructed per-layer table of the model's own depth as the dynamics step writes it (decided tests:
    ``<test>_sig`` yes / no / undecided), every statistic clear of both nulls unless the caller says otherwise."""
    base = {"layer": np.arange(L), "gamma": 0.2, "gamma_null_median": 0.05, "gamma_null_q95": 0.1,
            "gamma_sig": "yes", "gamma_saturated": False, "rho": 0.8, "rho_null_median": 0.5,
            "rho_null_q95": 0.6, "rho_sig": "yes", "rho_mc_sig": "yes", "rho_saturated": False, "tilt": 0.01,
            "tilt_null_median": 0.0, "tilt_null_q95": 0.005, "tilt_sig": "yes", "tilt_mc_sig": "yes",
            "tilt_saturated": False, "tilt_R": 2000, "first_lead_gamma": 0.05, "first_lead_gamma_p": 0.5,
            "first_lead_gamma_sig": "no", "attn_tilt_sig": "yes", "attn_tilt_neg_sig": "no", "ffn_tilt_sig": "no",
            "ffn_tilt_neg_sig": "no"}
    base.update(cols)
    return pd.DataFrame({k: (np.broadcast_to(np.asarray(v, dtype=object if isinstance(v, str) else None), L).copy()
                             if np.ndim(v) == 0 else v) for k, v in base.items()})


def test_c5_outside_the_paper_sizes_is_not_judged_and_never_passes():
    final = pd.Series({"pairwise_abs_cos": 0.999, "span_M_final": 0.9, "span_M_final_null_q99": 0.2,
                       "span_M_dim": 2, "span_M_final_null_median": 0.1})
    ok, measured, *_ = claims.c5(final, "real positive", None, CRIT)
    assert not ok and "not judged" in measured  # revision 2 code: passed ((c) ignored)
    assert claims.c5(final, "real positive", "base", CRIT)[0]  # the same model at a paper size passes


def test_c5_size_comes_from_the_configuration_never_from_a_name():
    base = {"arch": "albert", "d_model": 768, "n_heads": 12, "n_layers": 12}
    assert claims.albert_size({**base, "model": "my-database-model"}) == "base"
    assert claims.albert_size({**base, "n_heads": 8, "model": "albert-base-v2", "repo_id": "albert/albert-base-v2"}) \
        is None  # the name says base, the configuration does not
    assert claims.albert_size({"arch": "albert", "d_model": 4096, "n_heads": 64, "n_layers": 12}) == "xxlarge"
    assert claims.albert_size({**base, "arch": "bert"}) is None


def test_c6_a_needs_a_decided_holm_significance_not_one_uncorrected_q95_crossing():
    # gamma above the null's q95 in one layer, no layer significant after Holm: chance
    g = _layers(gamma_null_q95=np.r_[np.full(4, 0.25), 0.1, np.full(7, 0.25)], gamma_sig="no")
    ok, measured, *_ = claims.c6(g, CRIT)
    assert not ok and "in 0 of 12 layers" in measured and "uncorrected: 1" in measured
    g["gamma_sig"] = ["no"] * 4 + ["yes"] + ["no"] * 7  # the reverse: one layer survives Holm
    assert claims.c6(g, CRIT)[0]
    g["gamma_sig"] = ["no"] * 4 + ["undecided"] + ["no"] * 7  # its decision left to the Monte Carlo error
    v = claims.c6(g, CRIT)
    assert not v.ok and v.inconclusive and v.word == "inconclusive"
    g["gamma_sig"] = ["yes"] * 12
    g["gamma"] = 0.5 * (1 - 1e-9)  # below the weak bound by rounding only: undecided, never a pass
    assert claims.c6(g, CRIT).inconclusive


def test_saturated_layers_never_count_as_significant():
    g = _layers(rho=1.0)
    assert claims.c7(g, CRIT)[0]
    g["rho_saturated"], g["rho_sig"] = True, "no"  # the dynamics step never says yes for a saturated layer
    ok, measured, *_ = claims.c7(g, CRIT)
    assert not ok and "12 saturated, not counted" in measured


def test_c7_undecided_layers_make_it_inconclusive_only_when_they_decide_it():
    g = _layers(rho_sig=["yes"] * 5 + ["undecided"] * 2 + ["no"] * 5, rho_mc_sig="undecided", rho_R=200000)
    v = claims.c7(g, CRIT)  # 5 of 12 without them (fails), 7 with them (passes): inconclusive
    assert v.word == "inconclusive" and "undecided at R = 200000" in v.failed
    g["rho_sig"] = ["yes"] * 7 + ["undecided"] * 2 + ["no"] * 3  # passes either way
    assert claims.c7(g, CRIT).word == "reproduced"
    g["rho_sig"] = ["yes"] * 2 + ["undecided"] * 2 + ["no"] * 8  # fails either way
    assert claims.c7(g, CRIT).word == "not reproduced"


def test_c1_beating_random_directions_but_not_fs_other_eigen_directions_fails():
    # the Monte Carlo null says yes everywhere; F's other eigen-directions tilt as much: no power step shown
    law = _layers(tilt_mc_sig="yes", tilt_eig_sig="no", tilt_sig="no")
    v = claims.c1(law, None, None, CRIT)
    assert v.word == "not reproduced" and "0 of 12" in v.measured
    assert claims.c1(_layers(), None, None, CRIT).word == "reproduced"


def test_c1_row_shows_the_real_pass_and_says_when_random_weights_pass_too():
    v = claims.c1(_layers(), _layers(tilt_sig="no"), _layers(L=6), CRIT)
    assert v.ok and "real forward pass (FFN included), same test: 0 of 12" in v.measured
    assert claims.TWIN_SENTENCE in v.measured and "random-weight twin (law): 6 of 6" in v.measured
    v = claims.c1(_layers(), None, _layers(L=6, tilt_sig="no"), CRIT)
    assert claims.TWIN_SENTENCE not in v.measured


def _meta(shared):
    arch = "albert" if shared else "bert"
    return {"m": {"arch": arch, "random_weights": False, "weights_label": "trained", "shared_weights": shared,
                  "repo_id": "albert-base-v2" if shared else "x", "model": "m", "d_model": 768, "n_heads": 12,
                  "n_layers": 12}}


def _evaluate(meta, law, model):
    law, model = law.assign(model="m", mode="attention-only"), model.assign(model="m", mode="model")
    spectra = pd.DataFrame({"model": ["m"] * 12, "layer": range(12), "leading_type": "real positive",
                            "ratio_next": np.linspace(0.9, 0.5, 12)})
    law["pairwise_abs_cos"], law["span_M_final"], law["span_M_final_null_q99"] = 0.5, 0.1, 0.2
    law["span_M_dim"], law["span_M_final_null_median"] = 2, 0.1
    df = claims.evaluate(CRIT, meta, spectra, pd.concat([law, model]), [], pd.DataFrame({"model": []}))
    return df.set_index("claim")


def test_c7_is_judged_for_shared_weight_models():
    df = _evaluate(_meta(True), _layers(), _layers())
    assert df.loc["C7", "verdict"] == "reproduced" and df.loc["C7", "family"].startswith("ALBERT")


def test_c10_is_judged_on_the_real_passs_sublayers():
    # revision 3 passed this: the law tilts everywhere, the real pass shows no tilt at all
    df = _evaluate(_meta(False), _layers(), _layers(attn_tilt_sig="no"))
    assert df.loc["C10", "verdict"] == "not reproduced"
    assert "attention sublayer tilt significantly positive in 0 of 12" in df.loc["C10", "measured"]
    # a significantly negative real tilt in every layer (revision 3 passed it too) fails
    v = claims.c10(_layers(attn_tilt_sig="no", attn_tilt_neg_sig="yes"), _layers(), CRIT)
    assert not v.ok and "negative in 12 of 12" in v.measured
    # the attention tilts, but the FFN undoes it in a quarter of the layers or more: fails
    v = claims.c10(_layers(ffn_tilt_neg_sig=["yes"] * 3 + ["no"] * 9), _layers(), CRIT)
    assert not v.ok and "FFN undoes the tilt in 3 of 12" in v.failed
    # in fewer than a quarter: passes, with the four counts in the row
    v = claims.c10(_layers(ffn_tilt_neg_sig=["yes"] * 2 + ["no"] * 10), None, CRIT)
    assert v.ok and "FFN sublayer positive in 0 of 12, negative in 2 of 12" in v.measured


def test_a_verdict_that_changes_with_the_monte_carlo_seed_is_inconclusive():
    """table_robustness (paper.md section 4c): the same criteria on each variant's statistics; the view shows
    "k of n agree", and a verdict one of the other seeds does not share becomes "inconclusive"."""
    from powerlens.analysis.claims.robustness import robustness

    meta = _meta(False)
    law, model = _layers().assign(model="m", mode="attention-only"), _layers().assign(model="m", mode="model")
    spectra = pd.DataFrame({"model": ["m"] * 12, "layer": range(12), "leading_type": "real positive",
                            "ratio_next": np.linspace(0.9, 0.5, 12)})
    for d in (law, model):
        d["pairwise_abs_cos"], d["span_M_final"], d["span_M_final_null_q99"] = 0.5, 0.1, 0.2
        d["span_M_dim"], d["span_M_final_null_median"] = 2, 0.1
    dyn = pd.concat([law, model])
    judge = lambda d: claims.evaluate(CRIT, meta, spectra, d, [], pd.DataFrame({"model": []}))  # noqa: E731
    keys = {"model": "m", "mode": "model"}
    same = [pd.DataFrame({"layer": range(12), "rho_sig": "yes", "variant": v, **keys}) for v in ("seed1", "third0")]
    other = pd.DataFrame({"layer": range(12), "rho_sig": "no", "variant": "seed2", **keys})
    main = judge(dyn)
    assert main.set_index("claim").loc["C7", "verdict"] == "reproduced"
    out, table, agree = robustness(main, judge, dyn, pd.concat(same), pd.DataFrame(), {"BERT (trained)": ["m"]})
    assert agree[("C7", "BERT (trained)")] == "2 of 2 agree"
    assert out.set_index("claim").loc["C7", "verdict"] == "reproduced"
    fams = {"BERT (trained)": ["m"]}
    out, table, agree = robustness(main, judge, dyn, pd.concat(same + [other]), pd.DataFrame(), fams)
    row = out.set_index("claim").loc["C7"]
    assert agree[("C7", "BERT (trained)")] == "2 of 3 agree" and row["verdict"] == "inconclusive"
    assert "changes with the Monte Carlo seed" in row["failed part"] and "seed 2: not reproduced" in row["failed part"]
    assert pd.isna(table.set_index("claim").loc["C1", "seed 2"])  # the law's claim: a model-mode variant is no evidence
