"""The training comparison (paper.md section 4e, revision 6): beside each claim judged by random directions,
whether the trained model's lead beats its null by more than its matched controls' leads do, layer by layer.

Per layer t of the claim's reading, the lead's statistic as a z-score against its own random-direction null,
z_t = (lead - null mean) / null SD (sign reversed for a lower-tail test), for the trained model and for each
control seed; the difference d_t = z_t(trained) - mean over seeds of z_t(control); and a one-sided sign-flip
test over the layers of H0 "each d_t is symmetric about 0" against "trained larger": p = P(sum eps_t d_t >=
sum d_t) over independent signs eps_t = +-1, exact (all 2^L sign vectors) for L <= :data:`EXACT_UP_TO`, else
from :data:`FLIPS` seeded draws ((1 + #{>=}) / (1 + draws)). It is reported beside the verdict and never folded
into it: the paper's claims are about the mechanism, not about training.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from powerlens.analysis.verdict_tests import Field, TestSpec, tested

EXACT_UP_TO = 20  # layers: every sign vector enumerated (2^20 sums at most)
FLIPS = 100_000  # seeded sign vectors beyond it
_TIE = 1e-12  # relative: a flipped sum within this of the observed one counts as reaching it (rounding)


def z_scores(d: pd.DataFrame, spec: TestSpec) -> pd.Series:
    """The lead's z-score against its random-direction null per tested layer (indexed by layer), signed so that
    larger is in the claim's direction."""
    d = tested(d, spec)
    mean, sd = spec.col(Field.NULL_MEAN), spec.col(Field.NULL_SD)
    if mean not in d or sd not in d:
        return pd.Series(dtype=float)
    z = (d[spec.value] - d[mean]) / d[sd].where(d[sd] > 0)
    return pd.Series((-z if spec.tail == "lower" else z).to_numpy(dtype=float), index=d["layer"].to_numpy())


def sign_flip_p(diff: np.ndarray, seed: int = 0) -> float:
    """One-sided sign-flip p of sum(diff) (module docstring); NaN without a layer."""
    x = np.asarray(diff, dtype=np.float64)
    x = x[~np.isnan(x)]
    if not len(x):
        return float("nan")
    t = float(x.sum())
    tol = _TIE * max(1.0, float(np.abs(x).sum()))
    if len(x) <= EXACT_UP_TO:
        sums = np.zeros(1)
        for v in x:  # every sign vector's sum, 2^L of them
            sums = np.concatenate([sums + v, sums - v])
        return float(np.mean(sums >= t - tol))
    rng = np.random.default_rng([int(seed), 4])
    hits = 0
    for start in range(0, FLIPS, 10_000):
        eps = rng.choice(np.array([-1.0, 1.0]), size=(min(10_000, FLIPS - start), len(x)))
        hits += int(np.sum(eps @ x >= t - tol))
    return (1 + hits) / (1 + FLIPS)


@dataclass(frozen=True)
class Training:
    """The training comparison of one trained model and one claim reading: mean z of the trained lead and of the
    controls' (mean over seeds), the layers compared, the seeds, and the one-sided sign-flip p."""

    z_trained: float
    z_control: float
    layers: int
    seeds: int
    p: float

    def text(self) -> str:
        from powerlens.core.fmt import fmt_num

        return (f"mean z {fmt_num(self.z_trained)} trained vs {fmt_num(self.z_control)} controls ({self.seeds} "
                f"seeds) over {self.layers} layers; sign-flip p {fmt_num(self.p)} (one-sided: trained larger)")


def training(trained: pd.DataFrame, controls: list[pd.DataFrame], spec: TestSpec, seed: int = 0
             ) -> Training | None:
    """The comparison from the trained model's dynamics table and its controls' (same mode), on ``spec``; None
    where a table lacks the null's mean and SD or no layer is shared."""
    zt = z_scores(trained, spec)
    zc = [z_scores(c, spec) for c in controls]
    zc = [z for z in zc if len(z)]
    if not len(zt) or not zc:
        return None
    zc_mean = pd.concat(zc, axis=1).mean(axis=1, skipna=False)
    diff = (zt - zc_mean).dropna()
    if not len(diff):
        return None
    return Training(float(zt.reindex(diff.index).mean()), float(zc_mean.reindex(diff.index).mean()), len(diff),
                    len(zc), sign_flip_p(diff.to_numpy(), seed))
