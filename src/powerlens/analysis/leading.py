"""What ``powerlens inspect`` prints of each layer, solved without the full eigendecomposition (issue #54): the
lead, its type, v_1 and |lambda_next| / |lambda_1|, by the same ordering, type and phase rules as
:mod:`powerlens.analysis.spectra` (whose full eig is the fallback wherever a partial answer is not trusted to be
the full eig's)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from powerlens.analysis.spectra import (
    COMPLEX_TOL,
    LayerMatrices,
    canonical_phase,
    leading_type,
    partner_index,
    sort_order,
)

INSPECT_K = 6  # eigenvalues ARPACK computes per layer (the lead, its partner, lambda_next and spares)
INSPECT_FULL_MAX_D = 64  # at or below this d the full eig is cheap: always used
INSPECT_SEP = 1e-6  # relative margins (x |lambda_1|) below which the partial answer is not trusted: full eig
INSPECT_VEC_SEP = 1e-9  # margin between v_1's largest component moduli (canonical phase, printed order)
INSPECT_RESIDUAL = 1e-10  # ||F v_1 - lambda_1 v_1|| / ||F||_F above which ARPACK's pair is not trusted


def _leading_fields(vals: np.ndarray, v1: np.ndarray, method: str) -> dict:
    """The fields ``powerlens inspect`` prints, from eigenvalues sorted by :func:`sort_order` (all of them, or the
    leading ones) and the lead's canonical eigenvector, as :meth:`Spectrum.summary` computes them."""
    l1 = vals[0]
    typ = leading_type(l1)
    nxt = vals[2] if typ == "complex pair" and len(vals) > 2 else vals[1]
    return {"lambda1_re": l1.real, "lambda1_im": l1.imag, "abs_lambda1": abs(l1), "leading_type": typ,
            "ratio_next": abs(nxt) / abs(l1) if abs(l1) > 0 else np.nan, "v1": v1, "method": method}


def _leading_full(F: np.ndarray) -> dict:
    """The full float64 eig, as :func:`layer_spectrum` solves it."""
    vals, V = np.linalg.eig(F)
    order = sort_order(vals)
    return _leading_fields(vals[order], canonical_phase(V[:, order[0]]), "full")


def _trusted(F: np.ndarray, vals: np.ndarray, v: np.ndarray, method: str, floor: float = 0.0) -> dict | None:
    """The leading fields from some of F's eigenvalues, sorted by :func:`sort_order` (the largest in modulus), and
    the lead's eigenvector ``v``, or None where they are not trusted to be the full eig's: a lead not separated by
    INSPECT_SEP |lambda_1| in modulus from lambda_next (which eigenvalue leads, and its type, would then hang on
    round-off: sort_order's rounding, its argument tie-break), an imaginary part near the complex threshold or a
    near-real pair, a conjugate partner not right after the lead, lambda_next not among ``vals`` or not above
    ``floor`` |lambda_1| (the eigenvalues left out lie below it), a large residual, or v_1's largest component
    moduli within INSPECT_VEC_SEP (canonical phase and the printed order would hang on round-off)."""
    if not (np.all(np.isfinite(vals)) and np.all(np.isfinite(v))):
        return None
    m = np.abs(vals)
    l1 = complex(vals[0])
    if not m[0] > 0:
        return None
    im = abs(l1.imag) / m[0]
    if COMPLEX_TOL * 1e-1 < im < max(10 * COMPLEX_TOL, INSPECT_SEP):  # near the type threshold, or a near-real pair
        return None
    j = 2 if leading_type(l1) == "complex pair" else 1
    if j >= len(vals) or m[j] <= floor * m[0]:
        return None
    if j == 2 and partner_index(vals, 0) != 1:
        return None
    if m[0] - m[j] <= INSPECT_SEP * m[0]:
        return None
    v1 = canonical_phase(v)
    if np.linalg.norm(F @ v1 - l1 * v1) > INSPECT_RESIDUAL * np.linalg.norm(F):
        return None
    top = np.sort(np.abs(v1))[::-1][:4]
    if np.any(np.diff(top) >= -INSPECT_VEC_SEP):
        return None
    if j == 1:
        v1 = v1.real.astype(np.complex128)  # a real lead's eigenvector is real, as LAPACK returns it
    return _leading_fields(vals, v1, method)


def _leading_arpack(F: np.ndarray, v0: np.ndarray, k: int) -> dict | None:
    """The leading fields from ARPACK's k largest-modulus eigenpairs (:func:`_trusted`), None where ARPACK fails
    or its answer is not trusted."""
    from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, eigs

    try:
        vals, V = eigs(F, k=k, which="LM", v0=v0, tol=0)
    except (ArpackNoConvergence, ArpackError, ValueError):
        return None
    order = sort_order(vals)
    # the last one may be half of a conjugate pair split by k: lambda_next must come before it
    return _trusted(F, vals[order][:-1], V[:, order[0]], "arpack")


INSPECT_ZERO_FLOOR = 1e-6  # the reduced problem's lambda_next must exceed this x |lambda_1| (F's zeros lie far below)


def grouped_factors(V: np.ndarray, W_O: np.ndarray, n_heads: int) -> tuple[np.ndarray, np.ndarray] | None:
    """F = W_O V with V's head blocks repeated (grouped-query attention: each key-value group's rows once per query
    head) is F = W' U, U (r, d) the distinct blocks and W' (d, r) the sums of W_O's column blocks of the heads
    sharing each: r = n_kv d_head < d, and F's non-zero eigenvalues are those of U W' (r, r), its eigenvectors
    W' u. None where no block repeats or r >= d."""
    d, m = W_O.shape
    if n_heads < 2 or m % n_heads or V.shape != (m, d):
        return None
    dh = m // n_heads
    first: dict[bytes, int] = {}
    groups: list[list[int]] = []
    for h in range(n_heads):
        key = np.ascontiguousarray(V[h * dh:(h + 1) * dh]).tobytes()
        if key in first:
            groups[first[key]].append(h)
        else:
            first[key] = len(groups)
            groups.append([h])
    if len(groups) == n_heads or len(groups) * dh >= d:
        return None
    U = np.concatenate([V[g[0] * dh:(g[0] + 1) * dh] for g in groups], axis=0)
    Wp = np.concatenate([sum(W_O[:, h * dh:(h + 1) * dh] for h in g) for g in groups], axis=1)
    return U, Wp


def _leading_grouped(F: np.ndarray, U: np.ndarray, Wp: np.ndarray) -> dict | None:
    """The leading fields from the full eig of the reduced U W' (:func:`grouped_factors`, :func:`_trusted`): every
    non-zero eigenvalue of F, so lambda_next is F's unless it is near zero (INSPECT_ZERO_FLOOR)."""
    vals, Ug = np.linalg.eig(U @ Wp)
    order = sort_order(vals)
    return _trusted(F, vals[order], Wp @ Ug[:, order[0]], "grouped", floor=INSPECT_ZERO_FLOOR)


def leading_summary(F: np.ndarray, *, k: int = INSPECT_K, seed: int = 0, V: np.ndarray | None = None,
                    W_O: np.ndarray | None = None, n_heads: int | None = None) -> dict:
    """What ``powerlens inspect`` prints of one layer matrix F (d, d), without the full eigendecomposition:
    ``lambda1_re``, ``lambda1_im``, ``abs_lambda1``, ``leading_type``, ``ratio_next`` (the
    :meth:`Spectrum.summary` fields of the same names, by the same ordering and type rules), ``v1`` (the lead's
    unit eigenvector in :func:`canonical_phase`, as ``Spectrum.vecs[:, 0]``) and ``method``: "grouped" (given
    F = W_O V with repeated head blocks, grouped-query attention: the full eig of the r x r reduced matrix,
    :func:`grouped_factors`), "arpack" (ARPACK's k largest-modulus eigenpairs, ``scipy.sparse.linalg.eigs``,
    float64, tol 0, a seeded start vector) or "full" (``np.linalg.eig`` of F, as the spectra step): the full eig
    for d <= INSPECT_FULL_MAX_D and wherever the others' answer is not trusted to be its (:func:`_trusted`)."""
    F = np.asarray(F, dtype=np.float64)
    d = F.shape[0]
    if d > INSPECT_FULL_MAX_D and d > k + 2:
        fac = grouped_factors(V, W_O, n_heads) if V is not None and W_O is not None and n_heads else None
        if fac is not None:
            got = _leading_grouped(F, *fac)
            if got is not None:
                return got
        v0 = np.random.default_rng([seed, 54]).standard_normal(d)
        got = _leading_arpack(F, v0, k)
        if got is not None:
            return got
    return _leading_full(F)


def inspect_spectra(layers: list[LayerMatrices], *, threads: int, n_heads: int | None = None,
                    seed: int = 0) -> list[dict]:
    """:func:`leading_summary` of every unique layer (its V and W_O with ``n_heads``), on ``threads`` threads as
    :func:`model_spectra` uses them (layers in parallel, ``threads // workers`` BLAS threads each)."""
    from threadpoolctl import threadpool_limits

    workers = max(1, min(threads, len(layers)))
    blas = max(1, threads // workers)
    with threadpool_limits(blas):
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda u: leading_summary(layers[u].F, seed=seed, V=layers[u].V, W_O=layers[u].W_O,
                                                          n_heads=n_heads), range(len(layers))))
