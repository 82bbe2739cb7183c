"""Steering: the stated bound, the reversible edit (byte-identical restore), and the baseline's footing."""

import numpy as np
import pytest
import torch

from powerlens import steering as st
from powerlens.errors import PowerlensError
from powerlens.sources import byte_tokenizer

from ..conftest import build_tiny


def layer_with_known_threshold(d=12, seed=0):
    """Symmetric F with lambda_1 = 1 on v_1, u orthogonal to range(F) (F u = 0, u^T F = 0). Then
    F' = F + alpha u u^T has eigenvalue alpha on u exactly: u is principal iff alpha > 1 (kappa > 1)."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    u = Q[:, -1]
    lam = np.concatenate([[1.0], rng.uniform(-0.6, 0.6, d - 2), [0.0]])
    F = Q @ np.diag(lam) @ Q.T
    W_V = rng.standard_normal((d, d)) + 2 * np.eye(d)
    return F, W_V, u


def test_u_principal_above_the_bound_and_not_below():
    F, W_V, u = layer_with_known_threshold()
    bound = st.kappa_bound(F, 1.0)
    assert bound >= 1.0  # the stated bound is sufficient, so it cannot undercut the exact threshold (1)
    for kappa in (bound, 1.5 * bound, 10 * bound, 1e3 * bound):
        chk = st.principal_check(F, W_V, u, kappa * 1.0)
        assert chk["u_principal"] and chk["cos_v1_u"] > 1 - 1e-9 and chk["lstsq_residual"] < 1e-9
    for kappa in (0.0, 0.5, 0.9):
        assert not st.principal_check(F, W_V, u, kappa)["u_principal"]


def test_bound_holds_on_generic_layers():
    rng = np.random.default_rng(3)
    for _ in range(5):
        d = 16
        F = rng.standard_normal((d, d)) / np.sqrt(d)
        W_V = rng.standard_normal((d, d))
        u = rng.standard_normal(d)
        u /= np.linalg.norm(u)
        lam1 = np.abs(np.linalg.eigvals(F)).max()
        chk = st.principal_check(F, W_V, u, st.kappa_bound(F, lam1) * lam1)
        assert chk["u_principal"] and chk["sin_v1_u"] <= st.DELTA


def test_singular_V_uses_least_squares():
    F, W_V, u = layer_with_known_threshold()
    W_V[:, 0] = 0.0  # singular
    z = st.rank1_z(W_V, u)
    assert np.isfinite(z).all()
    assert st.principal_check(F, W_V, u, 0.0)["lstsq_residual"] >= 0


@pytest.mark.parametrize("name,arch", [("tiny-gpt2", "gpt2"), ("tiny-bert", "bert"), ("tiny-albert", "albert"),
                                        ("tiny-gpt-neo", "gpt_neo")])
def test_edit_is_reversible_and_is_the_rank1_change(name, arch):
    model = build_tiny(name, torch.float64)
    from powerlens.adapters import ADAPTERS

    w = ADAPTERS[arch].extract(model)
    before = st.checksum(model)
    d = w.d_model
    rng = np.random.default_rng(0)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    W_V = w.layer(w.n_layers - 1).W_V.numpy()
    z = st.rank1_z(W_V, u)
    with st.rank1_output_edit(model, arch, u, z, alpha=7.0):
        assert st.checksum(model) != before
        w2 = ADAPTERS[arch].extract(model)
        dF = w2.F(w2.n_layers - 1).numpy() - w.F(w.n_layers - 1).numpy()
        assert np.allclose(dF, 7.0 * np.outer(u, u), atol=1e-9)  # F' = F + alpha u u^T
    assert st.checksum(model) == before  # byte-identical restore
    with pytest.raises(RuntimeError):
        with st.rank1_output_edit(model, arch, u, z, alpha=3.0):
            raise RuntimeError("boom")
    assert st.checksum(model) == before  # restored on error too


def test_split_target_token_is_refused():
    model = build_tiny("tiny-gpt2")
    tok = byte_tokenizer("gpt2")
    with pytest.raises(PowerlensError, match="split by the tokenizer"):
        st.target_vector(model, tok, "gpt2", "embedding", "the")
    u, tid = st.target_vector(model, tok, "gpt2", "embedding", "e")
    assert tid == tok.convert_tokens_to_ids("e") and abs(np.linalg.norm(u) - 1) < 1e-12


def test_steering_step_baseline_on_same_tokens(tmp_path):
    from powerlens.steps import extract, fetch_model, spectra, steering

    from ..conftest import REPO

    m = tmp_path / "manifest.json"
    fetch_model("g", {"arch": "gpt2", "source": "random", "twin_of": "tiny-gpt2"}, m)
    extract(m, tmp_path / "w.safetensors", tmp_path / "w.json")
    spectra(tmp_path / "w.safetensors", tmp_path / "w.json", tmp_path / "s.npz", tmp_path / "s.csv")
    df = steering(m, tmp_path / "w.safetensors", tmp_path / "w.json", tmp_path / "s.npz", REPO / "config/prompts.txt",
                  tmp_path / "st.csv", tmp_path / "st.json", [{"kind": "unembedding", "token": "e"}], [0, 8, 256],
                  max_prompts=6)
    sw = df[df["kappa"] >= 0]
    for kappa, g in sw.groupby("kappa"):
        assert g["n_tokens"].nunique() == 1  # rank-1 and baseline measured on the same tokens
    r1 = sw[sw["method"].str.startswith("rank-1")].set_index("kappa")
    assert r1.loc[256, "cos_after_layer_model"] > r1.loc[0, "cos_after_layer_model"]
    assert r1.loc[256, "u_principal"] and r1.loc[0, "kl_from_unsteered"] == pytest.approx(0, abs=1e-12)
    import json

    meta = json.loads((tmp_path / "st.json").read_text())
    assert meta["checksum_before"] == meta["checksum_after"]
