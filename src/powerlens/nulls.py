"""Monte Carlo null distributions of random directions (paper.md section 4, "Statistics").

Neither tokens nor prompts are independent units: between two layers the whole corpus shares a drift of
the mean token, so for a *fixed* direction the sign of a(t+1) - a(t) agrees across tokens and prompts, and a
binomial sign test over tokens (or prompts) calls a large share of random directions "significant". The
verdict's test is therefore a Monte Carlo test: the statistic s(D) of the leading direction D is compared with
the same statistic of R random subspaces of D's dimension r (unit vectors for r = 1, planes for r = 2),
measured on the same tokens in the same pass,

    p = (1 + #{k : s(N_k) >= s(D)}) / (1 + R),

one-sided, Holm across layers. For a random D the statistic is exchangeable with the R null draws, so the
test is significant 5% of the time by construction, whatever the dependence between tokens.

Random subspaces are drawn once per model (seeded) and shared by all layers, so the projections of a state
that leaves layer t and enters layer t + 1 are computed once.
"""

from __future__ import annotations

import numpy as np
import torch


def random_subspaces(d: int, r: int, R: int, rng: np.random.Generator) -> np.ndarray:
    """R random r-dimensional subspaces of R^d (Haar), as one matrix (d, R * r) whose columns k*r .. k*r+r-1
    are an orthonormal basis of subspace k."""
    G = rng.standard_normal((R, d, r))
    if r == 1:
        Q = G / np.linalg.norm(G, axis=1, keepdims=True)
    else:
        Q, Rm = np.linalg.qr(G)  # (R, d, r) batched
        Q = Q * np.sign(np.diagonal(Rm, axis1=1, axis2=2))[:, None, :]  # Haar: fix QR's sign ambiguity
    return np.ascontiguousarray(Q.transpose(1, 0, 2).reshape(d, R * r))


def subspace_alignments(x: torch.Tensor, U: torch.Tensor, r: int) -> torch.Tensor:
    """Alignment (n, R) of tokens x (n, d) with each of R subspaces stacked in U (d, R * r)."""
    proj = x @ U  # (n, R * r)
    if r > 1:
        proj = proj.view(x.shape[0], -1, r).norm(dim=-1)  # (n, R)
    else:
        proj = proj.abs()
    return proj / x.norm(dim=-1, keepdim=True).clamp_min(1e-300)


def mc_test(lead: float, null: np.ndarray) -> dict:
    """Monte Carlo test of ``lead`` against the null draws (H1: lead is larger).

    Returns the null's median and 95th percentile, the lead's percentile in the null (share of draws below
    it, in %), the empirical p = (1 + #{null >= lead}) / (1 + R), and R."""
    null = np.asarray(null, dtype=np.float64)
    null = null[~np.isnan(null)]
    R = len(null)
    if R == 0 or lead is None or np.isnan(lead):
        return {"null_median": np.nan, "null_q95": np.nan, "pct": np.nan, "p": np.nan, "R": R}
    return {"null_median": float(np.median(null)), "null_q95": float(np.quantile(null, 0.95)),
            "pct": float(100.0 * np.mean(null < lead)), "p": float((1 + np.sum(null >= lead)) / (1 + R)),
            "R": R}

