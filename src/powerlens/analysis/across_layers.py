"""One p per claim, and what the claim's test could reach (paper.md section 4d, revision 5).

A claim "in at least u of the L layers" is judged by one p, not by a count of Holm-significant layers:

* **Partial conjunction** (Benjamini and Heller, Bonferroni form, valid under any dependence between layers):
  with per-layer p values p_t (the random-direction null's, set to 1 where the claim's side condition fails),
  sorted p_(1) <= ... <= p_(L),

      p_claim = min(1, (L - u + 1) p_(u)).

  It is a non-decreasing function of every p_t, so the layers' intervals (Monte Carlo error and tie-break,
  :mod:`powerlens.analysis.nulls`) carry through endpoint by endpoint: the claim's interval is
  (L - u + 1) times [the u-th smallest lower end, the u-th smallest upper end]. Each layer's interval is taken
  at level 1 - 0.01 / L, so that all L cover at once with 99% probability and the claim's interval is a 99%
  statement about the claim (revision 6, paper.md section 4e; revision 5 took each layer's at 99%).
* **Specificity across the model**: beating random directions is not enough (a drift inside F's range lifts
  every direction there, and every eigen-direction with a positive eigenvalue is reinforced by its own step).
  In each layer the lead's rank r_t among the M_t other eigen-directions of its own kind (the members it beats)
  is uniform on {0, ..., M_t} if its label carries no information; assuming independence across layers (a
  modelling choice, stated as such in the outputs), the specificity p is the exact upper tail

      p_spec = P(U_1 + ... + U_L >= r_1 + ... + r_L),   U_t ~ uniform on {0, ..., M_t}, independent,

  a convolution of discrete uniforms. Ties between the lead and a member are broken by a seeded U (point p) and
  bounded both ways (interval). Layers are not independent (revision 6, section 4e): the specificity p is the
  larger of that p and the chains' p (:mod:`powerlens.analysis.tracking`: the lead's rank sum among the rank
  sums of its members followed from layer to layer), which holds its level where the layers' dependence runs
  along the members' geometry; each row gives the dependence the chains imply and the tipping correlation.
* **Power first**: the smallest p each rule could produce with perfect data, from the test's resolution alone:
  (L - u + 1) times the upper bound of zero exceedances in R_cap draws at level 1 - 0.01 / L for the partial
  conjunction,
  prod_t 1 / (M_t + 1) for the specificity (and 1 / (n_chains + 1) for its chains, the larger of the
  two). A criterion whose attainable p is not below alpha cannot pass: its
  verdict is "underpowered", never "not reproduced".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from powerlens.analysis import decisions as dc
from powerlens.analysis.tracking import ChainTest, rank_variance


def layers_needed(share: float, L: int) -> int:
    """u: the smallest count of layers that is at least ``share`` of ``L`` (at least 1)."""
    return max(1, math.ceil(share * L - 1e-12))


def claim_level(L: int) -> float:
    """Each layer's interval level in a claim over L layers, 1 - 0.01 / L: all L cover at once with 99%
    probability (Bonferroni), so the claim's interval is a 99% statement (paper.md section 4e)."""
    return 1.0 - (1.0 - dc.LEVEL) / max(int(L), 1)


def zero_upper(R: int, level: float = dc.LEVEL) -> float:
    """The 99% upper bound of a p from zero exceedances in R draws (Clopper-Pearson, two-sided level):
    the smallest upper end a Monte Carlo test of R draws can have."""
    return dc.mc_interval(0, 0, int(R), level)[1]


def draws_to_reach(k: int, alpha: float, cap: int, level: float = dc.LEVEL) -> int | None:
    """The smallest R with k * zero_upper(R, level) < alpha (k = L - u + 1 for a partial conjunction, whose
    layers' intervals are at :func:`claim_level`; L for a Holm count; 1 for a single test), or None when even the
    cap cannot reach it."""
    a = (1.0 - level) / 2
    if k * zero_upper(cap, level) >= alpha:
        return None
    # zero_upper(R) = 1 - a^(1/R): solve 1 - a^(1/R) < alpha / k
    R = max(1, math.floor(math.log(a) / math.log(1.0 - alpha / k)))
    while k * zero_upper(R, level) >= alpha:
        R += 1
    return R


@dataclass(frozen=True)
class Conjunction:
    """The partial-conjunction p of "at least u of L layers", its simultaneous 99% interval and what it could
    reach."""

    p: float
    lo: float
    hi: float
    u: int
    L: int
    decision: str  # yes / no / undecided at alpha
    attainable: float  # the smallest upper end the rule could have at the cap of draws, with perfect data

    def text(self) -> str:
        from powerlens.core.fmt import fmt_num

        return (f"p {fmt_num(self.p)} (simultaneous 99% interval {fmt_num(self.lo)} to {fmt_num(self.hi)}; at least "
                f"{self.u} of {self.L} layers)")


def partial_conjunction(p: np.ndarray, lo: np.ndarray, hi: np.ndarray, u: int, alpha: float,
                        r_cap: int) -> Conjunction:
    """(L - u + 1) p_(u) for each of the point p, the lower and the upper ends (NaN counts as 1: no evidence)."""
    p, lo, hi = (np.nan_to_num(np.asarray(a, dtype=float), nan=1.0) for a in (p, lo, hi))
    L = len(p)
    if L == 0 or not 1 <= u <= L:
        return Conjunction(np.nan, np.nan, np.nan, u, L, dc.NO, 1.0)
    k = L - u + 1
    at = lambda a: float(min(1.0, k * np.sort(a)[u - 1]))  # noqa: E731
    c_lo, c_hi = at(lo), at(hi)
    return Conjunction(at(p), c_lo, c_hi, u, L, dc.decide(c_lo, c_hi, alpha),
                       min(1.0, k * zero_upper(r_cap, claim_level(L))))


def uniform_sum_tail(M: np.ndarray) -> np.ndarray:
    """tail[s] = P(U_1 + ... + U_L >= s), U_t independent uniform on {0, ..., M_t}, for s = 0 .. sum M_t
    (the exact distribution, by convolution; no cancellation: every term is a sum of positive numbers)."""
    pmf = np.ones(1)
    for m in np.asarray(M, dtype=int):
        if m > 0:
            pmf = np.convolve(pmf, np.full(m + 1, 1.0 / (m + 1)))
    return np.cumsum(pmf[::-1])[::-1]


@dataclass(frozen=True)
class Specificity:
    """The lead's ranks among F's other eigen-directions of its own kind, across the model."""

    p: float
    lo: float
    hi: float
    decision: str
    attainable: float  # prod 1 / (M_t + 1): every layer's lead above all its members
    mean_pct: float  # the lead's mean percentile among its members (50 expected)
    top5: int  # layers where the lead is in the top 5% of its members
    top5_expected: float  # ... expected under the null (exact, per layer (floor(0.05 M) + 1) / (M + 1))
    layers: int  # layers with at least one member
    members: tuple[int, ...]  # M_t per layer
    tipping: float = float("nan")  # the exchangeable between-layer rank correlation at which p reaches alpha
    lag1: float = float("nan")  # lag-1 autocorrelation of the lead's percentile across layers (descriptive)
    p_independent: float = float("nan")  # the exact p under independent layers
    p_chains: float = float("nan")  # the lead's rank sum among its members' chains (tracking.ChainTest)
    chains: int = 0  # chains followed through the layers (0: not tracked, independence assumed)
    dependence: float = float("nan")  # the exchangeable between-layer rank correlation the chains imply

    def text(self) -> str:
        from powerlens.core.fmt import fmt_num

        return (f"p {fmt_num(self.p)}; lead's mean percentile {fmt_num(self.mean_pct)} among F's other "
                f"eigen-directions of its kind; top 5% in {self.top5} of {self.layers} layers "
                f"({fmt_num(self.top5_expected)} expected)" + self.dependence_text())

    def dependence_text(self) -> str:
        """Revision 6 (section 4e): what the layers' dependence does to this p: the independent p and the chains'
        p it is the larger of, the between-layer rank correlation the chains imply (the dependence estimate), the
        one at which the independent p would reach alpha (tipping), and the lead's lag-1 autocorrelation."""
        from powerlens.core.fmt import fmt_num

        out = ""
        if self.chains:
            out += (f"; the larger of p {fmt_num(self.p_independent)} (independent layers) and p "
                    f"{fmt_num(self.p_chains)} (among {self.chains} chains of members followed across layers); "
                    f"dependence estimate: between-layer rank correlation {fmt_num(self.dependence)}")
        else:
            out += "; independence assumed (members not tracked across layers)"
        if not np.isnan(self.tipping):  # p at or above alpha: no dependence is needed to make it fail
            out += ("; the independent p stays below alpha at any between-layer rank correlation" if self.tipping >= 1
                    else "; the independent p would reach alpha near independence (normal approximation)"
                    if self.tipping <= 0 else
                    f"; the independent p would reach alpha at a between-layer rank correlation of "
                    f"{fmt_num(self.tipping)}")
        return out + ("" if np.isnan(self.lag1) else
                      f"; the lead's lag-1 autocorrelation across layers {fmt_num(self.lag1)}")


def tie_rank(beaten: int, tied: int, u: float) -> int:
    """The lead's randomised rank among its members: ``beaten`` plus a uniform share of the ``tied`` places
    (``u`` in [0, 1) seeded), uniform on {0, ..., M} under the null whatever the ties."""
    return int(beaten) + min(int(tied), int(np.floor(u * (int(tied) + 1))))


def specificity(beaten: np.ndarray, tied: np.ndarray, M: np.ndarray, rank: np.ndarray, alpha: float,
                chain: ChainTest | None = None) -> Specificity:
    """Specificity p from each layer's count of members the lead beats (``beaten``), ties with it (``tied``),
    members (``M``) and randomised rank (``rank``, :func:`tie_rank`: the point p). NaN rows (no lead value)
    count as no member. With ``chain`` (:func:`powerlens.analysis.tracking.chain_test`) each of the point p and
    the interval's ends is the larger of the independent one and the chains' (a test valid under either)."""
    beaten, tied, M, rank = (np.asarray(a, dtype=float) for a in (beaten, tied, M, rank))
    ok = ~(np.isnan(beaten) | np.isnan(tied) | np.isnan(M) | np.isnan(rank)) & (np.nan_to_num(M) > 0)
    b, t, m, r = beaten[ok].astype(int), tied[ok].astype(int), M[ok].astype(int), rank[ok].astype(int)
    tail = uniform_sum_tail(m)

    def at(s: float) -> float:
        s = int(s)
        return float(tail[s]) if s < len(tail) else 0.0

    p, hi, lo = at(r.sum()), at(b.sum()), at((b + t).sum())
    p_ind = p
    if chain is not None and len(m):
        p, lo, hi = (max(x, ChainTest.p_of(k, chain.n)) for x, k in ((p, chain.ge), (lo, chain.ge_lo),
                                                                     (hi, chain.ge_hi)))
    pct = 100.0 * (b + t / 2.0) / np.maximum(m, 1)
    top = int(np.sum(m - b - t <= 0.05 * m))
    expected = float(np.sum((np.floor(0.05 * m) + 1) / (m + 1)))
    attainable = float(np.prod(1.0 / (m + 1.0))) if len(m) else 1.0
    if chain is not None and len(m):
        attainable = max(attainable, ChainTest.p_of(0, chain.n))
    lag1 = (float(np.corrcoef(pct[:-1], pct[1:])[0, 1]) if len(pct) >= 3 and np.std(pct[:-1]) > 0
            and np.std(pct[1:]) > 0 else float("nan"))
    return Specificity(p, lo, hi, dc.decide(lo, hi, alpha) if len(m) else dc.NO, attainable,
                       float(np.mean(pct)) if len(m) else float("nan"), top, expected, int(len(m)),
                       tuple(int(x) for x in m), tipping_correlation(r, m, alpha) if p_ind < alpha else float("nan"),
                       lag1, p_ind, ChainTest.p_of(chain.ge, chain.n) if chain else float("nan"),
                       chain.n if chain else 0, chain.dep if chain else float("nan"))


def correlated_sum_p(rank: np.ndarray, M: np.ndarray, rho: float) -> float:
    """The rank sum's one-sided p if the layers' ranks had exchangeable correlation ``rho`` (normal approximation,
    continuity corrected; :func:`tipping_correlation` inverts it)."""
    from scipy.stats import norm

    rank, M = np.asarray(rank, dtype=float), np.asarray(M, dtype=float)
    var, cross = rank_variance(M)
    return float(norm.sf((rank.sum() - 0.5 - M.sum() / 2.0) / np.sqrt(var + rho * cross)))


def tipping_correlation(rank: np.ndarray, M: np.ndarray, alpha: float) -> float:
    """The exchangeable correlation rho between the layers' ranks at which the rank sum's one-sided p reaches
    ``alpha``: the sum S of the ranks (uniform on {0..M_t}, mean M_t/2, variance v_t = M_t (M_t + 2) / 12) has
    variance sum v_t + rho ((sum sqrt v_t)^2 - sum v_t) under exchangeable correlation rho; with the normal
    approximation (continuity corrected), p(rho) = alpha where that variance equals ((S - 1/2 - mu) / z_alpha)^2.
    NaN where S does not exceed its mean (p at least 1/2: no dependence can make it significant) or with one
    layer; at most 0 where the approximation already misses alpha; 1 or more: it holds at any correlation."""
    from scipy.stats import norm

    rank, M = np.asarray(rank, dtype=float), np.asarray(M, dtype=float)
    if len(M) < 2:
        return float("nan")
    excess = rank.sum() - 0.5 - M.sum() / 2.0
    if excess <= 0:
        return float("nan")
    var, cross = rank_variance(M)
    need = (excess / norm.isf(alpha)) ** 2
    return float((need - var) / cross) if cross > 0 else float("nan")


def spearman_attainable(L: int) -> float:
    """The smallest one-sided p any rank correlation of L pairs can have: 1 / L! (the one ordering of L)."""
    return 1.0 / math.factorial(L) if L > 0 else 1.0
