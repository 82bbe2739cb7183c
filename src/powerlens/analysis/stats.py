"""Statistics: the one-sided sign test against 0.5 and Holm's step-down correction."""

from __future__ import annotations

import numpy as np
from scipy.stats import binomtest


def sign_test(increases: int, n: int) -> float:
    """One-sided exact binomial p-value P(X >= increases), X ~ Bin(n, 1/2) (H1: rho > 0.5)."""
    if n == 0:
        return float("nan")
    return float(binomtest(int(increases), int(n), 0.5, alternative="greater").pvalue)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (NaNs ignored and kept)."""
    p = np.asarray(p, dtype=float)
    out = np.full_like(p, np.nan)
    ok = ~np.isnan(p)
    q = p[ok]
    m = len(q)
    order = np.argsort(q, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * q[order]))
    res = np.empty(m)
    res[order] = adj
    out[ok] = res
    return out
