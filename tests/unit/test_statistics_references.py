"""Every statistical primitive a verdict rests on, against an independent reference (statsmodels or scipy where
they have it, brute-force enumeration in exact arithmetic otherwise), each with a case where a plausible wrong
formula gives another answer, so that the reference can tell the two apart.

| primitive | reference | the wrong formula it rules out |
| --- | --- | --- |
| ``stats.holm`` | statsmodels ``multipletests(method="holm")`` | Bonferroni; a step-up (Hochberg) order |
| ``decisions.mc_interval`` | scipy ``binomtest(...).proportion_ci(method="exact")`` | the normal (Wald) interval |
| ``across_layers.zero_upper`` | scipy's exact interval; the closed form 1 - (0.005)^(1/R) | the rule of three 3/R |
| ``across_layers.draws_to_reach`` | linear search over R with scipy's exact interval | - (off by one) |
| ``Null.test`` (randomised ties) | P(p <= a) = a by enumeration of the lead's place | ties counted as above / below |
| ``decisions.exact_interval`` | p at the tie-break's two ends | - |
| ``across_layers.partial_conjunction`` | max over all subsets of Bonferroni (Benjamini-Heller) | L p_(u) |
| ``across_layers.uniform_sum_tail`` | enumeration of every rank vector (fractions) | the normal approximation |
| ``across_layers.specificity`` / ``tie_rank`` | enumeration; uniform rank whatever the ties | ties as losses |
| ``theory.stratified_exact`` | enumerated strata tables (math.comb); statsmodels' MH odds ratio | pooled Fisher |
| ``stats.sign_test`` | enumeration with math.comb | the two-sided test |
| ``across_layers.spearman_attainable`` | enumeration of all orderings | - |
| ``layer_criteria.spearman_p`` (C8) | enumeration of all orderings, ties included | scipy's t approximation |
| ``across_layers.claim_level`` intervals | scipy's exact binomial interval at 1 - 0.01/L | the per-layer 99% |
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binomtest, fisher_exact, spearmanr
from statsmodels.stats.contingency_tables import StratifiedTable
from statsmodels.stats.multitest import multipletests

from powerlens.analysis import across_layers as al
from powerlens.analysis import decisions as dc
from powerlens.analysis.nulls import EigenDirections, RandomDirections
from powerlens.analysis.stats import holm, sign_test
from powerlens.analysis.theory.verdicts import stratified_exact

# --- Holm ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_holm_equals_statsmodels(seed):
    rng = np.random.default_rng([seed, 70])
    p = rng.uniform(0, 0.2, size=int(rng.integers(1, 15))) ** rng.uniform(0.5, 2)
    if seed % 3 == 0:
        p[: len(p) // 2] = p[0]  # ties
    assert np.allclose(holm(p), multipletests(p, method="holm")[1], rtol=0, atol=1e-15)


def test_holm_is_not_bonferroni_nor_hochberg():
    p = np.array([0.01, 0.02, 0.03])
    assert np.allclose(holm(p), [0.03, 0.04, 0.04])
    assert not np.allclose(holm(p), multipletests(p, method="bonferroni")[1])  # [0.03, 0.06, 0.09]
    q = np.array([0.02, 0.03, 0.04])
    assert not np.allclose(holm(q), multipletests(q, method="simes-hochberg")[1])  # step-up: all 0.04
    with_nan = np.array([0.01, np.nan, 0.02, 0.03])
    assert np.isnan(holm(with_nan)[1]) and np.allclose(holm(with_nan)[[0, 2, 3]], [0.03, 0.04, 0.04])


# --- Clopper-Pearson -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("above,tied,R", [(0, 0, 10), (0, 0, 2000), (3, 0, 2000), (3, 4, 2000), (0, 7, 50),
                                          (1999, 1, 2000), (2000, 0, 2000), (40, 2, 100), (12, 0, 20000)])
def test_mc_interval_is_clopper_pearson(above, tied, R):
    """scipy's exact interval (found by root-finding, to its own tolerance), and the interval's defining
    equations to 1e-9: P(X >= above; lo) = 0.005 and P(X <= above + tied; hi) = 0.005."""
    from scipy.stats import binom

    lo, hi = dc.mc_interval(above, tied, R)
    want_lo = binomtest(above, R).proportion_ci(confidence_level=0.99, method="exact").low
    want_hi = binomtest(above + tied, R).proportion_ci(confidence_level=0.99, method="exact").high
    assert lo == pytest.approx(want_lo, rel=1e-6, abs=1e-15)
    assert hi == pytest.approx(want_hi, rel=1e-6, abs=1e-15)
    if above > 0:
        assert binom.sf(above - 1, R, lo) == pytest.approx(0.005, rel=1e-9)
    if above + tied < R:
        assert binom.cdf(above + tied, R, hi) == pytest.approx(0.005, rel=1e-9)


def test_mc_interval_is_not_the_normal_interval():
    """With no exceedance the normal (Wald) interval collapses to 0; Clopper-Pearson's upper end does not."""
    lo, hi = dc.mc_interval(0, 0, 100)
    wald_hi = 0 + 2.5758 * math.sqrt(0 * 1 / 100)
    assert lo == 0.0 and wald_hi == 0.0 and hi == pytest.approx(0.0516, abs=1e-4)


@pytest.mark.parametrize("R", [1, 10, 104, 2000, 200_000])
def test_zero_upper_is_the_exact_bound_and_not_the_rule_of_three(R):
    got = al.zero_upper(R)
    assert got == pytest.approx(binomtest(0, R).proportion_ci(confidence_level=0.99, method="exact").high, rel=1e-9)
    assert got == pytest.approx(1 - 0.005 ** (1 / R), rel=1e-9)
    if R >= 100:
        assert abs(got - 3 / R) > 0.5 / R  # the 95% rule of three is another number at 99%


@pytest.mark.parametrize("k,alpha", [(1, 0.05), (3, 0.05), (6, 0.01), (12, 0.05)])
def test_draws_to_reach_is_the_first_R_that_reaches(k, alpha):
    def reaches(R):
        return k * binomtest(0, R).proportion_ci(confidence_level=0.99, method="exact").high < alpha

    R = al.draws_to_reach(k, alpha, 200_000)
    assert reaches(R) and not reaches(R - 1)
    assert al.draws_to_reach(k, alpha, cap=R - 1) is None


# --- the Monte Carlo p with randomised ties -----------------------------------------------------------------


def _exact_size(values: list[float], a: Fraction) -> Fraction:
    """P(p <= a) for a lead exchangeable with the n values of ``values`` (the lead is each of the n + 1 pooled
    values with equal chance), p = (#{beyond} + U (1 + #{tied})) / (n + 1), U uniform: enumerated exactly."""
    pooled = values
    n = len(pooled) - 1
    total = Fraction(0)
    for i, lead in enumerate(pooled):
        rest = pooled[:i] + pooled[i + 1:]
        above = sum(v > lead for v in rest)
        tied = sum(v == lead for v in rest)
        # (above + U (1 + tied)) / (n + 1) <= a  <=>  U <= (a (n + 1) - above) / (1 + tied)
        share = (a * (n + 1) - above) / (1 + tied)
        total += min(Fraction(1), max(Fraction(0), share))
    return total / len(pooled)


@pytest.mark.parametrize("pooled", [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [1, 1, 1, 2, 2, 3, 3, 3, 3, 4],
                                    [5] * 10, [0, 0, 1, 1, 1, 1, 1, 1, 2, 9]])
def test_the_randomised_p_is_exact_with_and_without_ties(pooled):
    """P(p <= a) = a at every a, ties or not (what the interval and the verdicts assume); counting ties as
    beyond the lead (conservative) or as beaten (anti-conservative) fails on the tied cases."""
    for a in (Fraction(1, 20), Fraction(1, 11), Fraction(3, 10), Fraction(1, 2), Fraction(7, 9)):
        assert _exact_size(pooled, a) == a
    # the code's p is the one enumerated: check it value by value, U at both ends and inside
    for i, lead in enumerate(pooled):
        rest = np.array(pooled[:i] + pooled[i + 1:], dtype=float)
        for u in (0.0, 0.37, 0.999):
            t = RandomDirections.test(float(lead), rest, u)
            above, tied = int((rest > lead).sum()), int((rest == lead).sum())
            assert t.p == pytest.approx((above + u * (1 + tied)) / (len(rest) + 1), rel=1e-15)
    if len(set(pooled)) < len(pooled):  # a wrong tie rule is visible
        n = len(pooled) - 1
        wrong = np.mean([(sum(v >= lead for v in pooled[:i] + pooled[i + 1:]) + 1) / (n + 1) <= 0.3
                         for i, lead in enumerate(pooled)])
        assert wrong != 0.3


def test_the_exact_interval_is_the_randomised_p_over_every_tie_break():
    rest = np.array([1.0, 2.0, 2.0, 2.0, 5.0, 7.0])
    t = EigenDirections.test(2.0, rest, 0.5)
    ends = [(t.above + u * (1 + t.tied)) / (t.n + 1) for u in (0.0, 1.0)]
    assert (t.lo, t.hi) == pytest.approx(tuple(ends), rel=1e-15)
    assert t.lo <= t.p <= t.hi


# --- the partial conjunction -------------------------------------------------------------------------------


def _bh_bonferroni(p: list[float], u: int) -> float:
    """Benjamini and Heller's partial conjunction, Bonferroni form, by its definition: the largest Bonferroni
    p of the intersection null over every subset of L - u + 1 layers."""
    L = len(p)
    return max(min(1.0, (L - u + 1) * min(sub)) for sub in itertools.combinations(p, L - u + 1))


@pytest.mark.parametrize("seed", range(12))
def test_partial_conjunction_is_benjamini_heller(seed):
    rng = np.random.default_rng([seed, 71])
    L = int(rng.integers(1, 8))
    p = rng.uniform(0, 0.3, L)
    for u in range(1, L + 1):
        c = al.partial_conjunction(p, p, p, u, 0.05, 200_000)
        assert c.p == pytest.approx(_bh_bonferroni(list(p), u), rel=1e-15)
    p = np.array([0.001, 0.004, 0.02, 0.5])
    c = al.partial_conjunction(p, p, p, 2, 0.05, 200_000)
    assert c.p == pytest.approx(0.012) and c.p != pytest.approx(len(p) * 0.004)  # not L p_(u)


# --- the sum of uniform ranks (specificity) ------------------------------------------------------------------


@pytest.mark.parametrize("M", [[1], [1, 1, 1], [2, 3], [0, 4, 1, 2], [5, 5, 5]])
def test_uniform_sum_tail_is_the_enumerated_tail(M):
    tail = al.uniform_sum_tail(np.array(M))
    ranks = list(itertools.product(*[range(m + 1) for m in M]))
    for s in range(sum(M) + 1):
        want = Fraction(sum(sum(r) >= s for r in ranks), len(ranks))
        assert tail[s] == pytest.approx(float(want), rel=1e-12)


def test_the_rank_sum_tail_is_not_the_normal_approximation():
    from scipy.stats import norm

    M = np.ones(6, dtype=int)  # six coins: the top rank sum has probability 1/64
    mean, var = 3.0, 6 * 0.25
    assert al.uniform_sum_tail(M)[6] == pytest.approx(1 / 64)
    normal = norm.sf((6 - 0.5 - mean) / math.sqrt(var))  # with the continuity correction
    assert abs(normal / (1 / 64) - 1) > 0.2


@pytest.mark.parametrize("M,tied", [(4, 0), (4, 2), (6, 6), (3, 1)])
def test_the_randomised_rank_is_uniform_whatever_the_ties(M, tied):
    """A lead exchangeable with its M members, ``tied`` of them equal to it: its randomised rank (tie_rank) is
    uniform on {0, ..., M}; counting ties as losses (rank = beaten) is not."""
    vals = [0.0] * (tied + 1) + [float(i + 1) for i in range(M - tied)]  # the lead's value is one of these
    counts = np.zeros(M + 1)
    wrong = np.zeros(M + 1)
    grid = (np.arange(1000) + 0.5) / 1000  # U on a fine grid: each rank's share to 1e-3
    for i, lead in enumerate(vals):
        rest = vals[:i] + vals[i + 1:]
        beaten, t = sum(v < lead for v in rest), sum(v == lead for v in rest)
        for u in grid:
            counts[al.tie_rank(beaten, t, u)] += 1
        wrong[beaten] += len(grid)
    assert np.allclose(counts / counts.sum(), 1 / (M + 1), atol=1e-3)
    if tied:
        assert not np.allclose(wrong / wrong.sum(), 1 / (M + 1), atol=1e-3)


def test_specificity_p_is_the_enumerated_tail_of_its_ranks():
    M, beaten, tied = np.array([3, 2, 4]), np.array([3, 1, 2]), np.array([0, 1, 1])
    rank = np.array([3, 2, 2])
    s = al.specificity(beaten, tied, M, rank, 0.05)
    ranks = list(itertools.product(*[range(m + 1) for m in M]))
    frac = lambda k: sum(sum(r) >= k for r in ranks) / len(ranks)  # noqa: E731
    assert s.p == pytest.approx(frac(rank.sum())) and s.lo == pytest.approx(frac((beaten + tied).sum()))
    assert s.hi == pytest.approx(frac(beaten.sum())) and s.attainable == pytest.approx(1 / len(ranks))


# --- the exact stratified test (C4) -----------------------------------------------------------------------


def _hyper(k: int, N: int, K: int, n1: int) -> Fraction:
    return Fraction(math.comb(K, k) * math.comb(N - K, n1 - k), math.comb(N, n1))


def _stratified_enumerated(tables) -> float:
    """P(sum A_k >= sum a_k) given every stratum's margins, by enumerating every table of every stratum."""
    per = []
    for a, n1, b, n0 in tables:
        N, K = n1 + n0, a + b
        per.append([(k, _hyper(k, N, K, n1)) for k in range(max(0, K - n0), min(K, n1) + 1)])
    obs = sum(t[0] for t in tables)
    total = Fraction(0)
    for combo in itertools.product(*per):
        if sum(k for k, _ in combo) >= obs:
            total += math.prod((q for _, q in combo), start=Fraction(1))
    return float(total)


@pytest.mark.parametrize("tables", [[(5, 8, 1, 8)], [(5, 8, 1, 8), (3, 4, 2, 6)], [(2, 3, 0, 3), (1, 5, 1, 2),
                                    (4, 4, 3, 4)], [(0, 4, 0, 4), (6, 6, 1, 5)]])
def test_stratified_exact_is_the_enumerated_conditional_test(tables):
    p, _, odds = stratified_exact(tables)
    assert p == pytest.approx(_stratified_enumerated(tables), rel=1e-10)
    st = StratifiedTable([np.array([[a, n1 - a], [b, n0 - b]]) for a, n1, b, n0 in tables])
    if np.isfinite(odds):
        assert odds == pytest.approx(st.oddsratio_pooled, rel=1e-12)


def test_stratifying_is_not_pooling():
    """Simpson's case: within each stratum several heads are more often unstable, pooled they are less often
    (the strata's sizes differ): pooled Fisher misses what the stratified test finds, and the other way."""
    tables = [(20, 20, 30, 40), (10, 80, 0, 20)]  # (unstable several, several, unstable one, one)
    p, _, _ = stratified_exact(tables)
    pooled = [[30, 70], [30, 30]]  # several heads 30 of 100 unstable, one head 30 of 60
    p_pooled = fisher_exact(pooled, alternative="greater").pvalue
    assert p < 0.01 and p_pooled > 0.99
    assert p == pytest.approx(_stratified_enumerated(tables), rel=1e-10)


# --- the sign test and Spearman's attainable p --------------------------------------------------------------


@pytest.mark.parametrize("k,n", [(0, 5), (3, 5), (5, 5), (9, 12), (40, 60)])
def test_sign_test_is_the_one_sided_binomial_tail(k, n):
    want = sum(math.comb(n, j) for j in range(k, n + 1)) / 2 ** n
    assert sign_test(k, n) == pytest.approx(want, rel=1e-12)
    two = min(1.0, 2 * min(want, sum(math.comb(n, j) for j in range(0, k + 1)) / 2 ** n))
    if 0 < k < n and k != n / 2:
        assert sign_test(k, n) != pytest.approx(two)  # not the two-sided test
    assert math.isnan(sign_test(0, 0))


@pytest.mark.parametrize("L", [3, 4, 5])
def test_spearman_attainable_is_one_ordering_in_all(L):
    x = np.arange(L)
    best = sum(spearmanr(x, np.array(perm)).statistic >= 1 - 1e-12 for perm in itertools.permutations(range(L)))
    assert al.spearman_attainable(L) == pytest.approx(best / math.factorial(L))


@pytest.mark.parametrize("seed", range(4))
def test_c8s_spearman_p_is_the_exact_permutation_p(seed):
    """C8 at L = 6 (MiniLM): the one-sided p counts every ordering of the layers whose rank correlation reaches
    the observed one (ties averaged); scipy's t approximation is not it (it gives 0 where one ordering in 720
    reaches rho = 1, below what six layers can give)."""
    from scipy.stats import rankdata

    from powerlens.analysis.claims.layer_criteria import spearman_p

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(6)
    y = np.round(x + rng.standard_normal(6), 0 if seed == 3 else 6)  # seed 3: ties in y
    rho, p, how = spearman_p(x, y)
    rx, ry = rankdata(x), rankdata(y)
    obs = np.corrcoef(rx, ry)[0, 1]
    hits = sum(np.corrcoef(rx, ry[list(o)])[0, 1] >= obs - 1e-12 for o in itertools.permutations(range(6)))
    assert how.startswith("exact") and rho == pytest.approx(obs) and p == pytest.approx(hits / 720, abs=1e-12)
    _, p_perfect, _ = spearman_p(np.arange(6.0), np.arange(6.0))
    assert p_perfect == pytest.approx(1 / 720) and spearmanr(np.arange(6), np.arange(6),
                                                             alternative="greater").pvalue < 1 / 720
