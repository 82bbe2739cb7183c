"""Activation addition at the edit's KL, beside C9's verdict (paper.md section 4e): how much more (or less) the
rank-1 edit aligns the tokens with u, and raises P(target), than activation addition does at the same KL on
unrelated prompts, each with a 95% bootstrap interval over prompts.

Activation addition's value at the edit's KL is the one :func:`~powerlens.analysis.kappa_sweep.at_kl`
credits (the best alignment of its beta sweep within the KL budget, the curve interpolated at the edit's KL, never
extrapolated); the same combination of sweep points is taken prompt by prompt, so the per-prompt values average
to it. The bootstrap resamples prompts (tokens of one prompt are not independent; prompts are the unit), the
statistic a token-weighted mean as the rows', :data:`BOOT` seeded resamples. Reported beside the verdict, never
part of it: the paper's claim is about the edit alone.
"""

from __future__ import annotations

import numpy as np

from powerlens.analysis.kappa_sweep import at_kl

BOOT = 2000  # bootstrap resamples over prompts
LEVEL = 0.95


def difference(edit: np.ndarray, base: np.ndarray, column: int, seed: int) -> tuple[float, float, float]:
    """Token-weighted mean of per-prompt sums ``column`` (1: |cos|, 2: P(target)), edit minus baseline, and its
    95% percentile bootstrap interval over prompts (NaN where the column is not measured)."""
    n, a, b = edit[:, 0], edit[:, column], base[:, column]
    if not len(n) or np.isnan(a).any() or np.isnan(b).any() or n.sum() <= 0:
        return float("nan"), float("nan"), float("nan")
    d = (a.sum() - b.sum()) / n.sum()
    rng = np.random.default_rng([int(seed), 66])
    idx = rng.integers(0, len(n), size=(BOOT, len(n)))  # (BOOT, P)
    boot = (a[idx].sum(1) - b[idx].sum(1)) / np.maximum(n[idx].sum(1), 1e-300)
    lo, hi = np.quantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return float(d), float(lo), float(hi)


def matched_columns(edit: np.ndarray, points: list[tuple[float, float, np.ndarray]], kl: float, seed: int) -> dict:
    """The rank-1 row's columns at the edit's KL: activation addition's credited alignment, and the differences
    (edit minus activation addition) in mean |cos| and in P(target) with their 95% bootstrap intervals; NaN where
    the sweep does not reach the edit's KL."""
    got = at_kl(points, kl)
    keys = ("aa_cos_at_kl", "diff_cos_at_kl", "diff_cos_at_kl_lo", "diff_cos_at_kl_hi", "diff_p_at_kl",
            "diff_p_at_kl_lo", "diff_p_at_kl_hi")
    if got is None:
        return dict.fromkeys(keys, float("nan"))
    cos, base = got
    return dict(zip(keys, (cos, *difference(edit, base, 1, seed), *difference(edit, base, 2, seed))))
