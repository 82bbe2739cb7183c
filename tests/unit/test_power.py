"""Verdicts with power (paper.md section 4d, revision 5): one p per claim (the partial conjunction over layers),
the specificity p across the model (calibrated on a simulated law whose lead is not special, with power when
it is), the smallest p each rule could reach, and, for every criterion read on the token dynamics, a constructed
case at each offline model's own resolution (L layers, M eigen-directions of the lead's kind, R0 draws) with
the effect planted (passes), without it (fails), and at a resolution too low to pass ("underpowered")."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from powerlens.analysis import claims
from powerlens.analysis import decisions as dc
from powerlens.analysis.across_layers import (
    claim_level,
    draws_to_reach,
    layers_needed,
    partial_conjunction,
    specificity,
    tie_rank,
    uniform_sum_tail,
    zero_upper,
)
from powerlens.analysis.dynamics.decided import layer_columns
from powerlens.analysis.verdict_tests import (
    ATTN_TILT,
    ATTN_TILT_NEG,
    FFN_TILT,
    FFN_TILT_NEG,
    FIRST_GAMMA,
    GAMMA,
    RHO,
    TILT,
    first_draws,
    read_tests,
)

CAP = 200_000  # the schema's default dynamics.null_draws_cap
CRIT = {"C1_share_layers": 0.5, "C7_share_layers": 0.5, "C6_weak_below": 0.5, "C10_ffn_negative_below": 0.25,
        "alpha": 0.05,
        "null_draws_cap": CAP}


# --- the rules' arithmetic -----------------------------------------------------------------------------------

def test_partial_conjunction_is_the_u_th_smallest_p_times_l_minus_u_plus_1():
    p = np.array([0.001, 0.2, 0.004, 0.003, 0.5, 0.9])
    c = partial_conjunction(p, p * 0.9, p * 1.1, u=3, alpha=0.05, r_cap=CAP)
    assert c.p == pytest.approx(4 * 0.004) and c.lo == pytest.approx(4 * 0.0036) and c.hi == pytest.approx(4 * 0.0044)
    assert c.decision == "yes" and c.u == 3 and c.L == 6
    assert partial_conjunction(p, p, p, u=4, alpha=0.05, r_cap=CAP).decision == "no"  # 3 x 0.2
    # an interval straddling alpha / (L - u + 1) leaves it undecided
    q = np.array([0.001, 0.002, 0.025, 0.9])  # L 4, u 3: 2 x [0.024, 0.026] straddles 0.05
    assert partial_conjunction(q, q - 0.001, q + 0.001, u=3, alpha=0.05, r_cap=CAP).decision == "undecided"
    # u = 1 is Bonferroni over the layers
    assert partial_conjunction(p, p, p, u=1, alpha=0.05, r_cap=CAP).p == pytest.approx(6 * 0.001)


def test_layers_needed_and_the_draws_a_rule_needs():
    assert [layers_needed(0.5, L) for L in (6, 18, 30, 7)] == [3, 9, 15, 4]
    for k in (1, 6, 16, 30):
        R = draws_to_reach(k, 0.05, CAP)
        assert k * zero_upper(R) < 0.05 <= k * zero_upper(R - 1)
    assert draws_to_reach(5000, 0.05, CAP) is None  # the cap cannot reach it
    # R0 from the rule: SmolLM2's model mode (30 layers, C6 and the FFN clause read L x) needs more than 2000
    assert first_draws("model", 30, CRIT, 2000) == draws_to_reach(30, 0.05, CAP, claim_level(30)) > 2000
    # C1 (16 of 30): 16 x the bound at 2000 draws is 0.07 at the claim's level 1 - 0.01/30 (0.035 at 99%)
    assert first_draws("attention-only", 30, CRIT, 2000) == draws_to_reach(16, 0.05, CAP, claim_level(30)) > 2000
    assert first_draws("attention-only", 6, CRIT, 2000) == 2000  # MiniLM: 4 x 0.0035 at 1 - 0.01/6


def test_the_uniform_sum_tail_is_exact():
    M = [2, 3, 1]
    tail = uniform_sum_tail(M)
    sums = [sum(c) for c in itertools.product(*(range(m + 1) for m in M))]
    for s in range(sum(M) + 1):
        assert tail[s] == pytest.approx(np.mean([x >= s for x in sums]), abs=1e-15)
    assert tail[sum(M)] == pytest.approx(1 / np.prod([m + 1 for m in M]))


def test_specificity_bounds_its_ties_and_knows_its_power():
    s = specificity([5, 5], [0, 0], [10, 10], [5, 5], 0.05)
    assert s.lo == s.hi == s.p and s.decision == "no"
    tied = specificity([9, 9], [1, 1], [10, 10], [tie_rank(9, 1, 0.7), tie_rank(9, 1, 0.2)], 0.05)
    assert tied.lo < tied.p <= tied.hi  # ties bounded both ways, the point p between
    assert specificity([0], [0], [0], [0], 0.05).attainable == 1.0  # no member: no power
    assert specificity([1, 1, 1], [0, 0, 0], [1, 1, 1], [1, 1, 1], 0.05).attainable == 0.125


# --- the specificity test's calibration on a simulated law ----------------------------------------------------

def _simulated_model(rng, d=32, L=12, prompts=8, per=8, scale=0.3, spread=3.0, lead_gain=1.0, R=200):
    """The attention-only law (uniform attention within a prompt, L2 norm) through L layers whose F_t = Q diag(lam)
    Q^T (Q Haar) has a flat spectrum (|lambda| = ``scale``, random signs: the lead, index 0, is not special) or a
    lead ``lead_gain`` times the others. Tokens start around a shared direction (a corpus drift) with ``spread``.
    Returns per layer the random-direction p of the lead's tilt and its rank among F_t's other eigenvectors."""
    m = rng.standard_normal(d)
    x = m / np.linalg.norm(m) + spread * rng.standard_normal((prompts * per, d)) / np.sqrt(d)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    p_rd, ranks = [], []
    for _ in range(L):
        Q, _r = np.linalg.qr(rng.standard_normal((d, d)))
        lam = scale * rng.choice([-1.0, 1.0], d)
        if lead_gain != 1.0:
            lam[0] = scale * lead_gain
        F = (Q * lam) @ Q.T
        mean = x.reshape(prompts, per, d).mean(1).repeat(per, axis=0)  # uniform attention within each prompt
        y = x + mean @ F.T
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        U = rng.standard_normal((d, R))
        U /= np.linalg.norm(U, axis=0)
        tilt = lambda D: (np.abs(y @ D) - np.abs(x @ D)).mean(0)  # noqa: E731
        t_eig, t_null = tilt(Q), tilt(U)
        lead = t_eig[0]
        p_rd.append((np.sum(t_null > lead) + rng.random() * (1 + np.sum(t_null == lead))) / (R + 1))
        ranks.append(int(np.sum(t_eig[1:] < lead)))
        x = y
    return np.array(p_rd), np.array(ranks), d - 1


@pytest.mark.calibration  # about 10 s: 400 simulated models and 100 with a dominant lead
def test_specificity_is_calibrated_where_random_directions_are_not_and_has_power():
    """A flat spectrum: the lead is an eigenvector like any other, so the specificity p rejects 5% of the time at
    5% (within 2 standard errors over 400 models; measured 4.7% over 1500); the random-direction null alone rejects
    far more often per layer (17% over 1500 models: every eigenvector with a positive eigenvalue is reinforced by
    its own step and the drift lifts the whole range of F, why revision 5 judges specificity across the model).
    A dominant lead: it rejects."""
    rng = np.random.default_rng(2026)
    n = 400
    spec_rej, layer_rej, layers = 0, 0, 0
    for _ in range(n):
        p_rd, ranks, M = _simulated_model(rng)
        s = specificity(ranks, np.zeros(len(ranks)), np.full(len(ranks), M), ranks, 0.05)
        spec_rej += s.p < 0.05
        layer_rej += int(np.sum(p_rd < 0.05))
        layers += len(p_rd)
    se = math.sqrt(0.05 * 0.95 / n)
    assert abs(spec_rej / n - 0.05) <= 2 * se, spec_rej / n
    assert layer_rej / layers > 0.05 + 2 * math.sqrt(0.05 * 0.95 / layers), layer_rej / layers  # miscalibrated
    power = sum(specificity(r, np.zeros(len(r)), np.full(len(r), M), r, 0.05).p < 0.05
                for _, r, M in (_simulated_model(rng, lead_gain=4.0) for _ in range(100)))
    assert power >= 90, power


# --- every criterion at each offline model's resolution -------------------------------------------------------

# (L, M: the smallest and largest count of F's other eigen-directions of the lead's kind in a layer) as the offline
# run of 2026-12-05 measured them (dynamics-<mode>.csv, column tilt_eig_M); R0 comes from the rule (first_draws:
# 2000, and 3177 for SmolLM2's real pass, whose C6 and FFN clause multiply the smallest p by 30)
RESOLUTION = {"all-MiniLM-L6-v2": (6, 27, 191), "SmolLM2-135M": (30, 13, 95), "Gemma-3-270M": (18, 15, 127)}


def _test_rows(spec, L, M, R, rng, effect: float, base: float = 0.0, scale: float = 0.01, side=None):
    """One test's columns at L layers through the dynamics step's own function: random draws and eigen
    members ~ base + scale N(0, 1); the lead at base + ``effect`` (0: exchangeable with them)."""
    ms = rng.integers(M[0], M[1] + 1, L)
    nulls = [base + scale * rng.standard_normal(R) for _ in range(L)]
    members = [base + scale * rng.standard_normal(m) for m in ms]
    lead = [base + effect if effect else base + scale * rng.standard_normal() for _ in range(L)]
    return layer_columns(spec, lead, nulls, {"eig": members}, rng.random(L), {"eig": rng.random(L)}, 0.05)


def planted(name: str, effects: dict, seed: int = 0, M=None, L=None) -> pd.DataFrame:
    """A dynamics table at model ``name``'s resolution: per test (TestSpec -> effect), its columns."""
    L0, m_lo, m_hi = RESOLUTION[name]
    L = L or L0
    M = M or (m_lo, m_hi)
    rng = np.random.default_rng([seed, L])
    base = {"gamma": 0.05, "rho": 0.5, "tilt": 0.0}
    rows = [{"layer": t} for t in range(L)]
    for spec, eff in effects.items():
        R = first_draws("model" if spec is not TILT else "attention-only", L, CRIT, 2000)
        if spec is FIRST_GAMMA:
            cols = _test_rows(spec, 1, M, R, rng, eff, base["gamma"])
            rows[-1].update(cols[0])
            continue
        for r, c in zip(rows, _test_rows(spec, L, M, R, rng, eff, base[spec.stat])):
            r.update(c)
    return pd.DataFrame(rows)


MODELS = list(RESOLUTION)
TILT_UP = {TILT: 0.05}
MODEL_MODE = {GAMMA: 0.2, RHO: 0.3, TILT: 0.05, ATTN_TILT: 0.05, ATTN_TILT_NEG: 0.0, FFN_TILT: 0.0,
              FFN_TILT_NEG: 0.0, FIRST_GAMMA: 0.0}


@pytest.mark.parametrize("name", MODELS)
def test_c1_planted_passes_absent_fails_low_resolution_underpowered(name):
    assert claims.c1(planted(name, TILT_UP), None, CRIT).word == "reproduced"
    assert claims.c1(planted(name, {TILT: 0.0}), None, CRIT).word == "not reproduced"
    # one eigen-direction of the lead's kind per layer, three layers: the specificity p cannot go below 1/8
    v = claims.c1(planted(name, TILT_UP, M=(1, 1), L=3), None, CRIT)
    assert v.word == "underpowered" and "specificity" in v.underpowered and "0.125" in v.underpowered


@pytest.mark.parametrize("name", MODELS)
def test_c7_planted_passes_absent_fails_low_resolution_underpowered(name):
    assert claims.c7(planted(name, {RHO: 0.3}), CRIT).word == "reproduced"
    assert claims.c7(planted(name, {RHO: 0.0}), CRIT).word == "not reproduced"
    assert claims.c7(planted(name, {RHO: 0.3}, M=(0, 0)), CRIT).word == "underpowered"  # no member at all


@pytest.mark.parametrize("name", MODELS)
def test_c6_planted_passes_absent_fails_low_resolution_underpowered(name):
    # (c) planted as clear absence (the last output far below the null: p near 1), never left to one seed's luck
    ok = planted(name, {GAMMA: 0.2, FIRST_GAMMA: -0.04})
    assert claims.c6(ok, CRIT).word == "reproduced"
    assert claims.c6(planted(name, {GAMMA: -0.04, FIRST_GAMMA: -0.04}), CRIT).word == "not reproduced"
    # at most 20 draws a test: L x the upper bound of zero exceedances never reaches 0.05
    v = claims.c6(ok, {**CRIT, "null_draws_cap": 20})
    assert v.word == "underpowered" and "(a)" in v.underpowered


@pytest.mark.parametrize("name", MODELS)
def test_c10_planted_passes_absent_fails_low_resolution_underpowered(name):
    assert claims.c10(planted(name, MODEL_MODE), None, CRIT).word == "reproduced"
    assert claims.c10(planted(name, {**MODEL_MODE, ATTN_TILT: 0.0}), None, CRIT).word == "not reproduced"
    undone = planted(name, {**MODEL_MODE, FFN_TILT_NEG: -0.05})  # the FFN undoes it in every layer
    assert claims.c10(undone, None, CRIT).word == "not reproduced"
    assert claims.c10(planted(name, MODEL_MODE, M=(1, 1), L=3), None, CRIT).word == "underpowered"


def test_a_clause_that_could_not_fail_makes_a_pass_underpowered():
    """C10's FFN clause with too few draws to make a quarter of the layers Holm-significant: the attention clause
    alone (at full resolution) would pass, but the pass rests on a clause that could not fail."""
    from powerlens.analysis.claims.layer_criteria import from_parts, parts

    g = planted("SmolLM2-135M", MODEL_MODE)
    full = parts(g, "C10", CRIT)
    weak_ffn = parts(g, "C10", {**CRIT, "null_draws_cap": 500})[1]  # 30 x the bound at 500 draws > 0.05
    assert full[0].decision == "yes" and not weak_ffn.powered and weak_ffn.decision == "yes"
    v = from_parts([full[0], weak_ffn], CRIT, "-", "-")
    assert v.word == "underpowered" and "could not fail" in v.underpowered


@pytest.mark.parametrize("name", MODELS)
def test_c8_planted_passes_absent_fails_few_layers_underpowered(name):
    L = RESOLUTION[name][0]
    gap = np.linspace(0.05, 0.6, L)

    def tables(gamma):
        spec = pd.DataFrame({"layer": range(len(gamma)), "ratio_next": 1 - gap[:len(gamma)]})
        dyn = pd.DataFrame({"layer": range(len(gamma)), "gamma": gamma, "gamma_null_median": 0.04,
                            "rho_p": 0.5})
        return spec, dyn

    assert claims.c8(*tables(0.05 + 0.2 * gap), 0.05).word == "reproduced"
    assert claims.c8(*tables(0.25 - 0.2 * gap), 0.05).word == "not reproduced"
    v = claims.c8(*tables((0.05 + 0.2 * gap)[:3]), 0.05)  # 3 layers: 1/3! = 0.167
    assert v.word == "underpowered" and v.attainable.startswith("0.167")


# --- draws only where they can change a verdict ---------------------------------------------------------------

def test_tests_no_criterion_reads_are_never_extended():
    """In the law no criterion reads gamma or rho, in the real pass none reads the whole layer's tilt or the
    sublayers' other tails: those tests keep R0 draws whatever their intervals say."""
    assert read_tests("attention-only") == {TILT}
    assert read_tests("model") == {GAMMA, RHO, ATTN_TILT, FFN_TILT_NEG, FIRST_GAMMA}


def _p_at(share, R, rng):
    """A lead and R null draws whose exceedance share is ``share`` (the p a layer reports)."""
    null = rng.random(R)
    return float(np.quantile(null, 1 - share)), null


def test_the_planner_extends_only_the_layers_that_decide_the_claim():
    """Six layers, u = 3: two clear, one near alpha / 4, three far above: only the one that decides p_(3) is
    extended; a layer already "no" on its side condition and the far ones keep their draws."""
    from powerlens.analysis import parts as pt
    from powerlens.analysis.verdict_tests import layer_tests, reading

    rng = np.random.default_rng(5)
    shares = [0.0, 0.0, 0.0125, 0.4, 0.5, 0.6]
    leads, nulls = zip(*(_p_at(s, 2000, rng) for s in shares))
    cols = layer_columns(TILT, [x + 1.0 for x in leads], [n + 1.0 for n in nulls], {"eig": [np.zeros(5)] * 6},
                        rng.random(6), {"eig": rng.random(6)}, 0.05)
    g = pd.DataFrame([{"layer": t, **c} for t, c in enumerate(cols)])
    part = pt.evaluate(reading("C1"), layer_tests(g, TILT), CRIT)
    assert part.conj.decision == dc.UNDECIDED
    assert pt.to_extend([part], lambda x, i: True) == [(part, 2)]
    side_no = g.assign(tilt_side=["no"] * 6)  # every layer's tilt on the wrong side: nothing to extend
    assert pt.evaluate(reading("C1"), layer_tests(side_no, TILT), CRIT).straddling == ()


def test_the_power_check_of_a_finished_run_can_fail(tmp_path):
    """tests/determinism/check_power.py (run on CI's offline run): a 'not reproduced' whose attainable p is not
    below alpha fails it, the same cell reading 'underpowered' passes."""
    import csv
    import json
    import subprocess
    import sys

    from ..conftest import REPO

    (tmp_path / "results" / "r").mkdir(parents=True)
    (tmp_path / "paper_tables" / "r").mkdir(parents=True)
    (tmp_path / "results" / "r" / "provenance.json").write_text(json.dumps({"config": {"dynamics": {"alpha": 0.05}}}))

    def run(word: str, attainable: str) -> int:
        with open(tmp_path / "paper_tables" / "r" / "table_claims.csv", "w", newline="") as f:
            w = csv.DictWriter(f, ["claim", "family", "attainable p", "verdict"])
            w.writeheader()
            w.writerow({"claim": "C1", "family": "Llama (trained, 4-bit)", "attainable p": attainable, "verdict": word})
        return subprocess.run([sys.executable, str(REPO / "tests/determinism/check_power.py"), str(tmp_path), "r"],
                              capture_output=True).returncode

    assert run("not reproduced", "SmolLM2-135M: 0.129") == 1
    assert run("underpowered", "SmolLM2-135M: 0.129") == 0
    assert run("not reproduced", "SmolLM2-135M: 0.000424") == 0
    assert run("reproduced", "(a) 0.00159; x: 0.2") == 1


def test_the_tipping_correlation_is_where_the_correlated_rank_sum_reaches_alpha():
    """Revision 6 (section 4e): each specificity row says at which exchangeable between-layer rank correlation
    its p would reach alpha. Checked: the correlated p equals alpha there and falls below it under; a lead at
    the top of every layer holds at any correlation; a sum below its mean has none; and the correlated p is
    calibrated (5% + 2 SE at 5%) on ranks drawn with that correlation (a shared latent, Spearman ~0.45)."""
    from scipy import stats

    from powerlens.analysis.across_layers import correlated_sum_p, tipping_correlation

    M = np.array([27, 60, 191, 100, 45, 80])
    r = np.array([25, 50, 160, 90, 30, 70])
    rho = tipping_correlation(r, M, 0.05)
    assert 0 < rho < 1 and correlated_sum_p(r, M, rho) == pytest.approx(0.05, rel=1e-9)
    assert correlated_sum_p(r, M, rho / 2) < 0.05 < correlated_sum_p(r, M, min(1.0, rho * 1.5))
    assert tipping_correlation(M, M, 0.05) >= 1  # top of every layer: significant even if all layers were one
    assert np.isnan(tipping_correlation(M // 3, M, 0.05))
    s = specificity(r, np.zeros(6), M, r, 0.05)
    assert s.tipping == pytest.approx(rho) and "p would reach alpha at a between-layer rank correlation" in s.text()
    rng = np.random.default_rng(1)
    L, m, latent = 12, 31, 0.47
    true_rank_corr = 6 / np.pi * np.arcsin(latent / 2)  # Spearman of a Gaussian pair with correlation 0.47
    n, rej = 1000, 0
    for _ in range(n):
        z = rng.standard_normal(m + 1)
        ranks = [stats.rankdata(np.sqrt(latent) * z + np.sqrt(1 - latent) * rng.standard_normal(m + 1))[0] - 1
                 for _ in range(L)]
        rej += correlated_sum_p(np.array(ranks), np.full(L, m), true_rank_corr) < 0.05
    assert rej / n <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / n), rej / n
