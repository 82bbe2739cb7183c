"""Issue #54: `powerlens inspect` solves only what its table shows (analysis.leading.leading_summary: ARPACK's few
largest-modulus eigenpairs, with the full eig wherever that answer is not trusted), and its numbers are the
full eigendecomposition's (model_spectra + spectra_table, the spectra step's), which stays as it was."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powerlens.analysis import spectra
from powerlens.analysis.leading import inspect_spectra, leading_summary
from powerlens.analysis.spectra import LayerMatrices, model_spectra, spectra_table

FIELDS = ["lambda1_re", "lambda1_im", "abs_lambda1", "ratio_next"]


def _full(mats, n_heads):
    specs = model_spectra(mats, n_heads=n_heads, k=1, threads=1, seed=0)
    return specs, spectra_table(specs, list(range(len(specs))))


def _same(fast: list[dict], specs, table) -> None:
    assert len(fast) == len(table)
    for u, r in enumerate(table.itertuples(index=False)):
        f = fast[u]
        assert f["leading_type"] == r.leading_type, u
        for c in FIELDS:
            assert np.isclose(f[c], getattr(r, c), rtol=1e-9, atol=1e-12 * r.abs_lambda1), (u, c, f[c], getattr(r, c))
        assert np.allclose(f["v1"], specs[u].vecs[:, 0], rtol=0, atol=1e-8), u


def _mats(F):
    return [LayerMatrices(F=F, V=np.eye(F.shape[0]), W_O=F)]  # F = W_O V; one head of d x d


def _with_block(d, block, seed):
    """A random d x d matrix (spectrum within radius ~1) plus ``block`` (2 x 2, or its top-left entry alone) on a
    random orthonormal plane: a lead set by the block."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((d, 2)))
    return rng.standard_normal((d, d)) / np.sqrt(d) + Q @ block @ Q.T


@pytest.mark.parametrize("case", ["real positive", "real negative", "complex pair"])
def test_fast_summary_equals_the_full_eig(case):
    d = 150
    block = {"real positive": np.diag([3.0, 0.0]), "real negative": np.diag([-3.0, 1.5]),
             "complex pair": np.array([[2.5, -1.2], [1.2, 2.5]])}[case]
    F = _with_block(d, block, seed=[54, len(case)])
    fast = inspect_spectra(_mats(F), threads=1)
    assert fast[0]["method"] == "arpack" and fast[0]["leading_type"] == case
    _same(fast, *_full(_mats(F), 1))


def test_a_near_tie_in_modulus_falls_back_to_the_full_eig():
    """lambda_1 = 2 and -2 (equal moduli up to round-off: which leads hangs on sort_order's rounding and its
    argument tie-break), and a pair 2 e^{+-i 0.3} just inside: the full eig decides, as the spectra step."""
    d = 120
    rng = np.random.default_rng(54)
    lam = rng.uniform(-1, 1, d)
    lam[:2] = [2.0, -2.0]
    S = rng.standard_normal((d, d))
    F = S @ np.diag(lam) @ np.linalg.inv(S)
    fast = inspect_spectra(_mats(F), threads=1)
    assert fast[0]["method"] == "full"
    _same(fast, *_full(_mats(F), 1))
    # a complex pair whose modulus ties the real lead within 1e-13: also the full eig
    R = np.array([[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]]) * 2.0 * (1 + 1e-13)
    B = np.zeros((d, d))
    B[:2, :2] = R
    B[2:, 2:] = np.diag(lam[1:-1])
    F2 = S @ B @ np.linalg.inv(S)
    fast2 = inspect_spectra(_mats(F2), threads=1)
    assert fast2[0]["method"] == "full"
    _same(fast2, *_full(_mats(F2), 1))


def test_small_d_and_arpack_failure_use_the_full_eig(monkeypatch):
    F = _with_block(40, np.diag([3.0, 0.0]), seed=1)  # d <= INSPECT_FULL_MAX_D
    assert leading_summary(F)["method"] == "full"
    _same([leading_summary(F)], *_full(_mats(F), 1))
    import scipy.sparse.linalg as sla

    def no_convergence(*a, **k):
        raise sla.ArpackNoConvergence("no convergence", np.zeros(0), np.zeros((0, 0)))

    monkeypatch.setattr(sla, "eigs", no_convergence)
    G = _with_block(100, np.diag([3.0, 0.0]), seed=2)
    got = leading_summary(G)
    assert got["method"] == "full"
    _same([got], *_full(_mats(G), 1))


def _grouped(d, n_heads, dh, n_kv, seed):
    rng = np.random.default_rng(seed)
    W_V = rng.standard_normal((n_kv * dh, d)) / np.sqrt(d)
    V = np.repeat(W_V.reshape(n_kv, dh, d), n_heads // n_kv, axis=0).reshape(-1, d)  # as v_per_head
    W_O = rng.standard_normal((d, n_heads * dh)) / np.sqrt(n_heads * dh)
    return [LayerMatrices(F=W_O @ V, V=V, W_O=W_O)]


@pytest.mark.parametrize("seed", range(4))
def test_grouped_query_layers_solve_the_reduced_matrix(seed):
    """Grouped-query attention (head blocks of V repeated): F's non-zero spectrum from U W' (r x r, r = n_kv d_head),
    the same numbers as the full eig of F."""
    mats = _grouped(d=128, n_heads=8, dh=16, n_kv=2, seed=[54, seed])
    fast = inspect_spectra(mats, threads=1, n_heads=8)
    assert fast[0]["method"] == "grouped"
    _same(fast, *_full(mats, 8))
    assert inspect_spectra(mats, threads=1)[0]["method"] == "arpack"  # without the head count: no reduction


def test_a_reduced_matrix_without_lambda_next_is_not_trusted():
    """r = 1 (one key-value head of d_head 1): lambda_next is one of F's zeros, which the reduced matrix leaves
    out: not its answer."""
    mats = _grouped(d=96, n_heads=4, dh=1, n_kv=1, seed=5)
    fast = inspect_spectra(mats, threads=1, n_heads=4)
    assert fast[0]["method"] != "grouped"
    specs, table = _full(mats, 4)
    assert fast[0]["leading_type"] == table["leading_type"][0]
    assert np.isclose(fast[0]["abs_lambda1"], table["abs_lambda1"][0], rtol=1e-9)
    assert fast[0]["ratio_next"] < 1e-9 and table["ratio_next"][0] < 1e-9  # round-off zeros, both


def test_minilm_fast_summary_and_inspect_table_equal_the_spectra_steps(minilm_path, tmp_path):
    """MiniLM's real weights: the fast summary of every layer, and the table `powerlens inspect` writes, are the
    spectra step's full-eig numbers (model_spectra + spectra_table), v_1 to 1e-8."""
    from powerlens.api import layer_matrices_of
    from powerlens.cli import main

    text, mats, layer_map, heads = layer_matrices_of(minilm_path)
    fast = inspect_spectra(mats, threads=1, n_heads=heads)
    assert [f["method"] for f in fast] == ["arpack"] * len(mats)  # the fast path does the work on real weights
    specs = model_spectra(mats, n_heads=heads, k=1, threads=1, seed=0)
    table = spectra_table(specs, layer_map)
    _same(fast, specs, table)
    main(["inspect", str(minilm_path), "--threads", "1", "--csv", str(tmp_path / "t.csv")])
    got = pd.read_csv(tmp_path / "t.csv")
    assert got["layer"].tolist() == table["layer"].tolist() and got["type"].tolist() == table["leading_type"].tolist()
    for col, c in zip(["Re lambda_1", "Im lambda_1", "|lambda_1|", "|l_next|/|l_1|"], FIELDS):
        assert np.allclose(got[col], table[c], rtol=1e-9, atol=1e-12), col
    for t, u in enumerate(layer_map):  # the printed components: the full eig's v_1, its 3 largest
        v = specs[u].vecs[:, 0]
        top = np.argsort(-np.abs(v))[:3]
        pair = table["leading_type"][t] == "complex pair"
        assert got["v_1 largest components"][t] == ", ".join(
            f"{i}:{abs(v[i]):.2f}" if pair else f"{i}:{v[i].real:+.2f}" for i in top)


def test_the_spectra_step_still_solves_the_full_eig():
    """model_spectra/layer_spectrum are untouched by the fast path: every eigenvalue, sorted."""
    F = _with_block(80, np.diag([3.0, 0.0]), seed=3)
    s = model_spectra(_mats(F), n_heads=1, k=2, threads=1, seed=0)[0]
    ev = np.linalg.eigvals(F)
    assert s.eigvals.shape == (80,) and np.allclose(s.eigvals, ev[spectra.sort_order(ev)], rtol=1e-10)
