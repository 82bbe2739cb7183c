"""Claim criteria of paper.md section 4b on constructed cases where the right verdict is known."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from powerlens import claims
from powerlens.corpus import batches
from powerlens.dynamics import layer_directions, layer_stats, null_sets, run_attention_only
from powerlens.spectra import layer_spectrum, spectra_arrays
from powerlens.weights import LayerWeights, ModelWeights

from ..conftest import REPO

CRIT = {"C1_share_layers": 0.5, "C5_consensus_abs_cos": 0.99, "C5_null_quantile": 0.99, "C6_weak_below": 0.5,
        "C7_share_layers": 0.5, "C9_alignment": 0.9, "alpha": 0.05}


def shared_layer(F: np.ndarray, b_O: np.ndarray) -> ModelWeights:
    """One shared layer with W_O W_V = F, uniform attention (W_Q = W_K = 0) and an output bias b_O."""
    d = F.shape[0]
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    z = torch.zeros(d, d, dtype=torch.float64)
    zero = torch.zeros(d, dtype=torch.float64)
    lw = LayerWeights(z, z, t(np.eye(d)), t(F), zero, zero, zero, t(b_O), torch.ones(d, dtype=torch.float64),
                      zero, 1e-5, 1.0)
    return ModelWeights("albert", "post", False, d, 2, [lw], [0] * 4)


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
    ok, measured, null = claims.c5(final, final["leading_type"], None, CRIT)
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
    ok, measured, _ = claims.c5(final, final["leading_type"], "base", CRIT)
    assert ok, measured
    ok, measured, _ = claims.c5(final, final["leading_type"], "xxlarge", CRIT)  # expects a complex lead
    assert not ok and "expected complex" in measured


def test_complex_pair_layer_does_not_count_as_ratio_one_in_c8():
    """A complex leading pair has |lambda_2| = |lambda_1| by conjugacy: the pair convention's ratio is 1.
    C8 uses the first eigenvalue beyond the pair."""
    rng = np.random.default_rng(2)
    from powerlens.theory import prescribed_matrix

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
    ok, measured, _ = claims.c8(spec, dyn, 0.05)
    assert ok, measured
    dyn["gamma"] = 0.1 + 0.3 * ratio_next  # anti-correlated: not reproduced
    assert not claims.c8(spec, dyn, 0.05)[0]


def test_spec_copy_is_the_shared_spec():
    shared = REPO.parent / "shared" / "paper.md"
    if not shared.is_file():
        pytest.skip("../shared/paper.md is not beside this checkout")
    assert (REPO / "docs" / "paper.md").read_text() == shared.read_text()
    text = shared.read_text()
    assert "Revision 2" in text


def test_config_claims_block_holds_the_section_4b_criteria():
    import yaml

    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    props = schema["properties"]["claims"]["properties"]
    assert set(props) == {"C1_share_layers", "C5_consensus_abs_cos", "C5_null_quantile", "C6_weak_below",
                          "C7_share_layers", "C9_alignment"}
    assert {k: v["default"] for k, v in props.items()} == {k: v for k, v in CRIT.items() if k != "alpha"}
    assert schema["properties"]["dynamics"]["properties"]["null_draws"]["minimum"] >= 2000
