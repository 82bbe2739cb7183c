"""Decisions that do not hang on noise (paper.md section 4c, revision 4; section 4d, revision 5, for claims).

A Holm decision is taken from an *interval* of each unadjusted p, never from one number:

* Monte Carlo null (R random directions): the p the test estimates is P(null > lead) + U P(null = lead) for
  the seeded tie-break U. Its 99% interval at the current R is [lower Clopper-Pearson bound of #{null > lead},
  upper bound of #{null >= lead}] out of R: it covers the Monte Carlo error *and* every tie-break U, so
  neither the seed of the draws nor the coin of the ties can move a decision taken outside it.
* Exact null (a finite set of M members, e.g. F's other eigen-directions, all of them enumerated): no Monte
  Carlo error, and the interval is the range of the randomised p over U, [#{> lead}, #{>= lead} + 1] / (M + 1).

Holm's adjusted p is a non-decreasing function of each unadjusted p, so the intervals are carried through it
endpoint by endpoint. A test is "yes" (significant) when its adjusted upper bound is below alpha, "no" when
the adjusted lower bound is at or above alpha, else "undecided". A Monte Carlo test that is undecided is
extended along the same seeded stream of draws (R0, then 10 R0, then 100 R0, at most the cap, config
``dynamics.null_draws_cap``), the
layers that need it only, until it is decided; at the cap it stays "undecided". A criterion whose outcome
depends on undecided tests (it passes with them counted and fails without) is "inconclusive".

A quantity within :data:`REL_TOL` (relative) of its threshold is undecided too (:func:`near`): no rounding of
the machine decides a verdict.
"""

from __future__ import annotations

import numpy as np

LEVEL = 0.99  # the Monte Carlo interval's coverage (paper.md section 4c)
CHUNK = 4000  # random directions projected at once (memory: tokens x CHUNK float64 per state; resources count it)
REL_TOL = 1e-6  # a quantity this close (relative) to its threshold is undecided
YES, NO, UNDECIDED = "yes", "no", "undecided"


def extension_steps(r0: int, cap: int) -> list[int]:
    """The draw counts a test goes through: R0, 10 R0, 100 R0, ..., at most ``cap`` (the config's
    ``dynamics.null_draws_cap``)."""
    out = [int(r0)]
    while out[-1] < cap:
        out.append(min(int(cap), out[-1] * 10))
    return out


def mc_interval(above: int, tied: int, R: int, level: float = LEVEL) -> tuple[float, float]:
    """99% interval of a Monte Carlo p from ``above`` = #{null > lead} and ``tied`` = #{null == lead} among R
    draws: the lower Clopper-Pearson bound of above / R and the upper one of (above + tied) / R."""
    from scipy.stats import beta

    if R <= 0:
        return float("nan"), float("nan")
    a = (1.0 - level) / 2
    k_hi = above + tied
    lo = 0.0 if above <= 0 else float(beta.ppf(a, above, R - above + 1))
    hi = 1.0 if k_hi >= R else float(beta.ppf(1 - a, k_hi + 1, R - k_hi))
    return lo, hi


def exact_interval(above: int, tied: int, M: int) -> tuple[float, float]:
    """Range of the randomised p of a test against all M members of a finite null:
    [above, above + tied + 1] / (M + 1)."""
    if M <= 0:
        return float("nan"), float("nan")
    return above / (M + 1), min(1.0, (above + tied + 1) / (M + 1))


def holm_interval(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Holm-adjusted bounds: Holm applied to the lower ends and to the upper ends (NaN kept)."""
    from powerlens.analysis.stats import holm

    return holm(np.asarray(lo, dtype=float)), holm(np.asarray(hi, dtype=float))


def decide(lo_adj: float, hi_adj: float, alpha: float) -> str:
    """"yes" when the adjusted interval lies below alpha, "no" when at or above it, else "undecided" (NaN: no)."""
    if np.isnan(lo_adj) or np.isnan(hi_adj):
        return NO
    if hi_adj < alpha:
        return YES
    if lo_adj >= alpha:
        return NO
    return UNDECIDED


def both(*decisions: str) -> str:
    """Significance against every null: "no" if any says no, "yes" if all say yes, else "undecided"."""
    if NO in decisions:
        return NO
    return YES if all(d == YES for d in decisions) else UNDECIDED


def near(x: float, threshold: float, rel: float = REL_TOL) -> bool:
    """Is x within ``rel`` (relative) of ``threshold``? Then a comparison with it is left to rounding."""
    if x is None or threshold is None or np.isnan(x) or np.isnan(threshold):
        return False
    scale = max(abs(threshold), abs(x))
    return abs(x - threshold) <= rel * scale if scale > 0 else True


def compare(x: float, threshold: float, above: bool = True, strict: bool = True) -> str:
    """x > threshold (``above``) or x < threshold, as "yes" / "no" / "undecided" (within :data:`REL_TOL`)."""
    if near(x, threshold):
        return UNDECIDED
    if x is None or np.isnan(x):
        return NO
    ok = (x > threshold) if above else (x < threshold)
    if not strict:
        ok = ok or x == threshold
    return YES if ok else NO



