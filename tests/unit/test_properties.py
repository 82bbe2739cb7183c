"""Property tests (hypothesis) for the maths everything rests on."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from powerlens.analysis.alignment import align, eig_direction
from powerlens.analysis.spectra import canonical_phase, layer_spectrum, sort_order
from powerlens.analysis.stats import holm, sign_test

seeds = st.integers(min_value=0, max_value=2**32 - 1)


@settings(max_examples=40, deadline=None)
@given(seed=seeds, d=st.integers(min_value=3, max_value=10))
def test_spectrum_is_invariant_under_similarity(seed, d):
    """Eigenvalues (sorted) of S F S^-1 equal those of F; the canonical eigenvectors map through S."""
    rng = np.random.default_rng(seed)
    F = rng.standard_normal((d, d))
    S = rng.standard_normal((d, d)) + 3 * np.eye(d)
    G = S @ F @ np.linalg.inv(S)
    a, b = layer_spectrum(F, k=d), layer_spectrum(G, k=d)
    assert np.allclose(a.eigvals, b.eigvals, atol=1e-7 * max(1, np.abs(a.eigvals).max()))
    assert np.all(np.diff(np.abs(b.eigvals)) <= 1e-9 * np.abs(b.eigvals).max())
    # v is an eigenvector of F => S v is one of G, with the same canonical form after normalisation
    gaps = np.abs(np.diff(np.abs(a.eigvals)))
    if gaps[0] > 1e-3 * np.abs(a.eigvals[0]):  # simple leading eigenvalue
        w = canonical_phase(S @ a.vecs[:, 0])
        assert np.allclose(w, b.vecs[:, 0], atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(seed=seeds, n=st.integers(min_value=1, max_value=12))
def test_phase_canonicalisation(seed, n):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    c = canonical_phase(v)
    i = np.argmax(np.round(np.abs(c), 12))
    assert abs(np.linalg.norm(c) - 1) < 1e-12 and abs(c[i].imag) < 1e-12 and c[i].real > 0
    theta = rng.uniform(0, 2 * np.pi)
    assert np.allclose(canonical_phase(v * np.exp(1j * theta) * rng.uniform(0.1, 10)), c, atol=1e-10)


@settings(max_examples=60, deadline=None)
@given(seed=seeds)
def test_sort_order_is_modulus_then_argument(seed):
    rng = np.random.default_rng(seed)
    vals = rng.standard_normal(7) + 1j * rng.standard_normal(7)
    vals = np.concatenate([vals, np.conj(vals[:2])])
    s = vals[sort_order(vals)]
    mod = np.abs(s)
    assert np.all(np.diff(mod) <= 1e-12)
    for i in range(len(s) - 1):
        if abs(mod[i] - mod[i + 1]) < 1e-12 * mod[0]:
            assert np.angle(s[i]) <= np.angle(s[i + 1])


@settings(max_examples=60, deadline=None)
@given(seed=seeds, complex_dir=st.booleans(), scale=st.floats(min_value=1e-3, max_value=1e3))
def test_alignment_invariant_to_token_scale_and_eigvec_sign(seed, complex_dir, scale):
    rng = np.random.default_rng(seed)
    d = 9
    v = rng.standard_normal(d) + (1j * rng.standard_normal(d) if complex_dir else 0)
    D = torch.tensor(eig_direction(canonical_phase(v)))
    D_flip = torch.tensor(eig_direction(canonical_phase(-v * (1j if complex_dir else 1))))
    x = torch.tensor(rng.standard_normal((5, d)))
    a = align(x, D)
    assert torch.allclose(align(scale * x, D), a, atol=1e-12)
    assert torch.allclose(align(-x, D), a, atol=1e-12)
    assert torch.allclose(align(x, D_flip), a, atol=1e-10)
    assert ((a >= 0) & (a <= 1 + 1e-12)).all()


@settings(max_examples=80, deadline=None)
@given(n=st.integers(min_value=1, max_value=400), data=st.data())
def test_sign_test_is_the_exact_binomial_tail(n, data):
    k = data.draw(st.integers(min_value=0, max_value=n))
    exact = float(binom.sf(k - 1, n, 0.5))  # P(X >= k)
    assert abs(sign_test(k, n) - exact) <= 1e-12 + 1e-9 * exact


@settings(max_examples=60, deadline=None)
@given(p=st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=30))
def test_holm_is_monotone_and_bounded(p):
    p = np.array(p)
    q = holm(p)
    assert np.all(q >= p - 1e-15) and np.all(q <= 1)
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(q[order]) >= -1e-15)
    assert np.all(q <= np.minimum(1, len(p) * p) + 1e-15)
