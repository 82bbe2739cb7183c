"""How far the steering sweeps go (paper.md section 4e, C9 revision 6): kappa doubles past the configured kappas until
the claim can be judged, and activation addition's beta sweep grows until it brackets the edit's KL.

A claim is judged where it can be met: revision 5 stopped at the configured kappas (256), where SmolLM2's real-pass
alignment was still rising, and read a step budget as evidence. :class:`KappaRule` says, from one target's curve of
the real pass's mean |cos(x, u)| against kappa, whether to run the next kappa (twice the largest so far) and, where
not, why the sweep stopped (:data:`STOPS`). :func:`beta_to_bracket` says which beta activation addition runs next
so that its KL range contains the edit's KL (never extrapolated, :func:`~powerlens.analysis.claims.c9.aa_at_kl`).
Both are pure functions of numbers already measured: the experiment
(:mod:`~powerlens.analysis.steering.experiment`) runs what they ask, and the claim
(:func:`~powerlens.analysis.claims.c9.c9`) reads why each sweep stopped. Free of torch: the claims read it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Why a target's kappa sweep stopped, in the words the steering table and the claim read.
STOPS = {
    "criterion": "the real pass's mean |cos| reached the criterion",
    "flat": "flat: the real pass's mean |cos| moved less than {flat} over the last two doublings",
    "ceiling": "a norm after the edit caps mean |cos| below the criterion at any kappa",
    "cap": "kappa reached C9_kappa_cap",
    "configured": "the configured kappas only (no doubling asked)",
}

#: "A flat curve": the real pass's mean |cos| moves less than this over two doublings of kappa (section 4e).
FLAT = 0.01


@dataclass(frozen=True)
class KappaRule:
    """Revision 6's doubling: past the configured kappas, kappa doubles until the real pass's mean |cos| reaches
    ``criterion`` (C9_alignment), moves less than :data:`FLAT` over two doublings, or would pass ``cap``
    (C9_kappa_cap); a ``ceiling`` below the criterion (the largest mean |cos| a norm after the edit allows)
    stops it at once: no kappa can meet the claim there, so none is spent. ``cap`` 0 runs the configured
    kappas only."""

    criterion: float
    cap: float

    def next(self, curve: dict[float, float], ceiling: float = float("nan")) -> tuple[float | None, str]:
        """(the next kappa, "") or (None, the stop's key in :data:`STOPS`) for one target's ``curve``
        {kappa: mean |cos| of the real pass} (kappa 0 allowed; only positive kappas are doubled)."""
        ks = sorted(k for k in curve if k > 0)
        if not ks:
            return None, "configured"
        top = ks[-1]
        if curve[top] >= self.criterion:
            return None, "criterion"
        if not math.isnan(ceiling) and ceiling < self.criterion:
            return None, "ceiling"
        if not self.cap:
            return None, "configured"
        before = [k for k in ks if k <= top / 4.0]  # two doublings back (or the nearest kappa below it)
        if before and curve[top] - curve[before[-1]] < FLAT:
            return None, "flat"
        nxt = 2.0 * top
        return (nxt, "") if nxt <= self.cap else (None, "cap")


#: At most this many betas are added to activation addition's sweep to bracket the edit's KL.
MAX_BRACKET_STEPS = 8


def beta_to_bracket(points: dict[float, float], kl: float) -> float | None:
    """The next beta factor to run so that the sweep's KL range {factor: KL on unrelated prompts} contains the
    edit's ``kl``: half the smallest factor while every KL lies above it, twice the largest while every KL lies
    below it; None once bracketed (or ``kl`` is not a number). The caller stops after
    :data:`MAX_BRACKET_STEPS` (then the comparison says the sweep does not reach the edit's KL)."""
    fin = {f: v for f, v in points.items() if not math.isnan(v)}
    if math.isnan(kl) or not fin:
        return None
    if min(fin.values()) > kl:
        return min(fin) / 2.0
    if max(fin.values()) < kl:
        return max(fin) * 2.0
    return None


def most_kappas(kappas: list[float], cap: float) -> list[float]:
    """The configured ``kappas`` and every doubling :class:`KappaRule` may add up to ``cap``: what a plan (time,
    memory) must allow for; a run usually stops earlier."""
    out = [float(k) for k in kappas]
    top = max(out, default=0.0)
    while top > 0 and cap and 2.0 * top <= cap:
        top *= 2.0
        out.append(top)
    return out


def at_kl(points: list[tuple[float, float, np.ndarray]], kl: float) -> tuple[float, np.ndarray] | None:
    """The most alignment activation addition reaches within a KL budget (paper.md section 4e): ``points`` its beta
    sweep as (KL on unrelated prompts, mean |cos|, a payload: per-prompt sums (P, 3) of counted tokens, sum |cos|,
    sum P(target), or any array). The largest mean |cos| at KL <= ``kl``, the curve interpolated linearly at
    ``kl`` itself, and the payload of the same combination of points. Never extrapolated: None where the sweep
    does not reach down to ``kl`` (crediting its first point would credit alignment reached at a larger KL) or
    ``kl`` is not a number."""
    pts = sorted((p for p in points if not (np.isnan(p[0]) or np.isnan(p[1]))), key=lambda p: p[0])
    if not pts or np.isnan(kl) or kl < pts[0][0]:
        return None
    x = np.array([p[0] for p in pts])
    cands = [(p[1], p[2]) for p in pts if p[0] <= kl]  # every sweep point within the budget
    if kl <= x[-1]:  # the curve at kl itself: between the two points around it
        j = int(np.searchsorted(x, kl, side="right"))
        j = min(max(j, 1), len(pts) - 1)
        (k0, y0, s0), (k1, y1, s1) = pts[j - 1], pts[j]
        w = 0.0 if k1 == k0 else (kl - k0) / (k1 - k0)
        cands.append(((1 - w) * y0 + w * y1, (1 - w) * s0 + w * s1))
    return max(cands, key=lambda c: c[0])
