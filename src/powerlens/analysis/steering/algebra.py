"""The rank-1 algebra: z with V^T z = u, the kappa bound (Bauer-Fike), the principal eigenvector of the
edited F' and the check that u is principal."""

from __future__ import annotations

import numpy as np

DELTA = 0.1  # "u is principal": leading eigenvalue's eigenvector within sin angle <= DELTA of u


INVERSE_ITERATIONS = 3  # steps of inverse iteration for the leading eigenvector (see principal_eig)


def rank1_z(W_V: np.ndarray, u: np.ndarray) -> np.ndarray:
    """z with V^T z = u (least squares if V is singular)."""
    z, *_ = np.linalg.lstsq(W_V.T, u, rcond=None)
    return z


def kappa_bound(F: np.ndarray, lam1_abs: float, delta: float = DELTA) -> float:
    """Sufficient kappa: alpha = kappa |lambda_1| >= max(2, 1 + 1/delta) ||F||_2 makes u principal (sin <= delta)."""
    norm2 = float(np.linalg.norm(F, 2))
    return max(2.0, 1.0 + 1.0 / delta) * norm2 / lam1_abs


EXACT_LSTSQ = 1e-10  # ||V^T z - u|| (u a unit vector) below which z solves V^T z = u exactly


def bound_note(lstsq_residual: float) -> str:
    """Why a target has no stated bound ("" when it has one): the Bauer-Fike bound is derived for
    F + alpha u u^T (normal perturbation); with V of rank < d (grouped-query attention) least squares gives
    V^T z = P u and F' = F + alpha u (P u)^T, for which it is not a bound (paper.md section 6)."""
    if lstsq_residual <= EXACT_LSTSQ:
        return ""
    return "none: V^T z = u has no exact solution (V of rank < d); the eigen-check decides"


def principal_eig(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every eigenvalue of A sorted by modulus (stable), and a unit eigenvector of the first.

    The eigenvalues come from LAPACK without eigenvectors (about 0.6x the time of a full ``eig``); the
    vector from inverse iteration, (A - sigma I) x_{k+1} = x_k with sigma = lambda_1 (1 + 1e-13) so that the
    factorisation is never exactly singular: each step shrinks the other directions by
    |lambda_1 - sigma| / |lambda_j - sigma|, about 1e-13 |lambda_1| / |lambda_j - lambda_1|, so three steps
    reach round-off unless lambda_1 is degenerate to about 1e-4 relative, where its eigenvector is
    ill-conditioned for any method."""
    import scipy.linalg as sl

    vals = np.linalg.eigvals(A)
    lam = vals[np.argsort(-np.abs(vals), kind="stable")]
    sigma = lam[0] * (1 + 1e-13) if lam[0] != 0 else 1e-300
    lu = sl.lu_factor(A - sigma * np.eye(A.shape[0], dtype=np.result_type(A, sigma)), check_finite=False)
    x = np.ones(A.shape[0], dtype=lu[0].dtype) / np.sqrt(A.shape[0])
    for _ in range(INVERSE_ITERATIONS):
        x = sl.lu_solve(lu, x, check_finite=False)
        x = x / np.linalg.norm(x)
    return lam, x


def principal_check(F: np.ndarray, W_V: np.ndarray, u: np.ndarray, scale: float,
                    eig_of_F: tuple | None = None, z: np.ndarray | None = None) -> dict:
    """Eigen-solve F' = F + alpha u (V^T z)^T (:func:`principal_eig`); is u its principal eigenvector?

    ``eig_of_F``: ``principal_eig(F)`` if already computed; used when alpha = 0 (then F' is F bit for bit,
    so the result is the same), so a model's kappa-0 checks share one eigen-solve. ``z``: ``rank1_z(W_V,
    u)`` if already computed (a least-squares solve, O(d^3): once per target, not per kappa)."""
    z = rank1_z(W_V, u) if z is None else z
    if scale == 0 and eig_of_F is not None:
        lam, v1 = eig_of_F
    else:
        lam, v1 = principal_eig(F + scale * np.outer(u, W_V.T @ z))
    cos = float(abs(np.vdot(v1, u)) / np.linalg.norm(v1))
    return {"cos_v1_u": cos, "sin_v1_u": float(np.sqrt(max(0.0, 1 - cos ** 2))), "lambda1": complex(lam[0]),
            "gap": float(abs(lam[0]) - abs(lam[1])), "ratio": float(abs(lam[1]) / abs(lam[0])),
            "u_principal": bool(np.sqrt(max(0.0, 1 - cos ** 2)) <= DELTA),
            "lstsq_residual": float(np.linalg.norm(W_V.T @ z - u))}

