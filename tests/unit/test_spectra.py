"""Spectra on matrices with known spectra: order, type, gap, phase, residual; per-head; determinism."""

import numpy as np
import pytest

from powerlens.analysis.spectra import canonical_phase, head_spectra, layer_spectrum, leading_type, sort_order


def with_spectrum(lams, d=12, seed=0):
    """A real diagonalisable d x d matrix whose leading eigenvalues are ``lams`` (complex ones paired),
    the rest drawn inside the disc of radius 0.5. Returns (F, eigenvalues, right eigenvectors)."""
    rng = np.random.default_rng(seed)
    blocks, vals = [], []
    for lam in lams:
        if abs(np.imag(lam)) > 0:
            a, b = np.real(lam), np.imag(lam)
            blocks.append(np.array([[a, -b], [b, a]]))
            vals += [lam, np.conj(lam)]
        else:
            blocks.append(np.array([[float(np.real(lam))]]))
            vals.append(complex(lam))
    while len(vals) < d:
        x = rng.uniform(-0.5, 0.5)
        blocks.append(np.array([[x]]))
        vals.append(complex(x))
    D = np.zeros((d, d))
    i = 0
    for B in blocks:
        n = B.shape[0]
        D[i:i + n, i:i + n] = B
        i += n
    S = rng.standard_normal((d, d)) + 3 * np.eye(d)
    F = S @ D @ np.linalg.inv(S)
    return F, np.array(vals), S


CASES = {
    "real positive": ([3.0, 2.0], "real positive", 1.0, 2 / 3),
    "real negative": ([-3.0, 2.5], "real negative", 0.5, 2.5 / 3),
    "complex pair": ([2.0 + 1.0j, 1.5], "complex pair", 0.0, 1.0),
    "repeated": ([2.0, 2.0, 1.0], "real positive", 0.0, 1.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_known_spectra(case):
    lams, typ, gap, ratio = CASES[case]
    F, vals, S = with_spectrum(lams)
    s = layer_spectrum(F, k=4)
    # order: by modulus desc, then argument asc, matches the constructed eigenvalues
    expect = vals[sort_order(vals)]
    assert np.allclose(s.eigvals, expect, atol=1e-9)
    assert np.all(np.diff(np.abs(s.eigvals)) <= 1e-9)
    summ = s.summary()
    assert summ["leading_type"] == typ
    assert summ["gap"] == pytest.approx(gap, abs=1e-8)
    assert summ["ratio"] == pytest.approx(ratio, abs=1e-8)
    assert summ["rel_residual"] < 1e-12
    # phase: unit norm, largest component real and positive
    for j in range(s.vecs.shape[1]):
        v = s.vecs[:, j]
        i = np.argmax(np.abs(v))
        assert np.linalg.norm(v) == pytest.approx(1.0)
        assert abs(v[i].imag) < 1e-12 and v[i].real > 0
    if typ == "complex pair":
        assert s.eigvals[0].imag < 0 < s.eigvals[1].imag  # pair stored (a - ib, a + ib)
        assert summ["gap_beyond_pair"] == pytest.approx(abs(lams[0]) - 1.5, abs=1e-8)
        # the plane basis is orthonormal and spans Re v1, Im v1
        P = s.plane
        assert np.allclose(P.T @ P, np.eye(2), atol=1e-12)
        v1 = s.vecs[:, 0]
        for x in (v1.real, v1.imag):
            assert np.linalg.norm(x - P @ (P.T @ x)) < 1e-10
    elif case == "real positive":
        # v1 is the constructed eigenvector (first column of S), up to the canonical sign
        u = S[:, 0] / np.linalg.norm(S[:, 0])
        assert abs(abs(np.vdot(u, s.vecs[:, 0])) - 1) < 1e-10


def test_residual_view_can_differ():
    # lambda_1 = -3 leads F, but |1 + lambda| is largest for lambda = 2.5: I + F has another leading vector
    F, vals, _ = with_spectrum([-3.0, 2.5])
    s = layer_spectrum(F, k=3)
    summ = s.summary()
    assert summ["residual_lambda_re"] == pytest.approx(2.5) and not summ["residual_same_as_F"]
    assert np.linalg.norm(F @ s.residual_vec - 2.5 * s.residual_vec) < 1e-9
    F2, _, _ = with_spectrum([3.0, -2.5])
    assert layer_spectrum(F2, k=3).summary()["residual_same_as_F"]


def test_phase_is_invariant_to_input_phase():
    rng = np.random.default_rng(1)
    v = rng.standard_normal(8) + 1j * rng.standard_normal(8)
    a = canonical_phase(v)
    for phase in (1j, -1, np.exp(0.7j)):
        assert np.allclose(canonical_phase(v * phase * 3.0), a)


def test_leading_type_thresholds():
    assert leading_type(2.0 + 0j) == "real positive"
    assert leading_type(-2.0 + 1e-14j) == "real negative"
    assert leading_type(2.0 + 1e-3j) == "complex pair"


def test_head_spectra_match_full_head_matrices():
    rng = np.random.default_rng(2)
    d, H = 24, 4
    dh = d // H
    W_V = rng.standard_normal((d, d)) / np.sqrt(d)
    W_O = rng.standard_normal((d, d)) / np.sqrt(d)
    heads = head_spectra(W_V, W_O, H)
    assert heads.shape == (H, dh)
    for h in range(H):
        full = W_O[:, h * dh:(h + 1) * dh] @ W_V[h * dh:(h + 1) * dh, :]  # (d, d), rank <= dh
        ev = np.linalg.eigvals(full)
        ev = ev[sort_order(ev)][:dh]  # the non-zero part
        assert np.allclose(heads[h], ev, atol=1e-10)
        assert np.allclose(np.sort_complex(heads[h]), np.sort_complex(ev), atol=1e-10)


def test_step_is_deterministic_and_shared_layers_solved_once(tmp_path):
    from powerlens.models.adapters import ADAPTERS
    from powerlens.pipeline.steps.spectra import spectra

    from ..conftest import build_tiny

    for name, arch in (("tiny-albert", "albert"), ("tiny-gpt-neo", "gpt_neo")):
        w = ADAPTERS[arch].extract(build_tiny(name))
        w.save(tmp_path / "w.safetensors", tmp_path / "w.json", {"model": name})
        a = spectra(tmp_path / "w.safetensors", tmp_path / "w.json", out_npz=tmp_path / "a.npz",
                    out_csv=tmp_path / "a.csv", top_k=4, threads=1, seed=0)
        spectra(tmp_path / "w.safetensors", tmp_path / "w.json", out_npz=tmp_path / "b.npz", out_csv=tmp_path / "b.csv",
                top_k=4, threads=2, seed=0)
        assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
        za, zb = np.load(tmp_path / "a.npz"), np.load(tmp_path / "b.npz")
        assert all(np.array_equal(za[k], zb[k]) for k in za.files)
        assert len(a) == w.n_layers and za["eigvals"].shape[0] == len(w.layers)
        # eigenvalues are those of F itself
        F = w.layers[0].F.numpy()
        assert np.allclose(np.sort_complex(za["eigvals"][0]), np.sort_complex(np.linalg.eigvals(F)), atol=1e-10)
