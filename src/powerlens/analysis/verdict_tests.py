"""The verdict statistics' names, declared once: which per-layer tests the dynamics step decides, the columns it
writes for each, and which claim reads which test, in which mode and by which rule. The dynamics step
(:mod:`powerlens.analysis.dynamics.decided`: what to compute and where more draws can change a verdict) and the
claims (:mod:`powerlens.analysis.claims`) both import this module, so a column name is spelled in one place.

A *test* is a probe (which states and which direction, :mod:`powerlens.analysis.dynamics.probes`), a statistic
(gamma, rho, the tilt) and a tail. Its columns in a dynamics table are ``<prefix>_<field>`` (:class:`Field`):
``tilt_p``, ``rho_p_hi``, ``attn_tilt_neg_eig_beaten``...

A *reading* is how one part of a claim's criterion reads one test (paper.md sections 4b and 4d):

``at_least``   "in at least u of the L layers": the partial-conjunction p over the layers' random-direction p
               (side condition applied), with the specificity p across the model where the claim needs it;
``fewer_than`` a clause of absence: the test is significant (per-layer Holm) in fewer than a share of the layers;
``not_last``   a clause of absence at the last depth: the test is not significant there (C6 (c));
``below_all``  a value below a bound in every layer (C6 (b), no null).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from powerlens.analysis import decisions as dc
from powerlens.analysis.nulls import RANKING, EigenDirections, RandomDirections

THRESHOLD = {"gamma": None, "rho": 0.5, "tilt": 0.0}  # the side condition of a statistic (None: none)


class Field:
    """The per-test fields of a dynamics table (suffixes of ``<prefix>_``)."""

    # the random directions' (:class:`~powerlens.analysis.nulls.RandomDirections`, declared there): the p and its
    # 99% interval (unadjusted), R, the share of draws tied with the lead, the null's median, q95, the percentile
    P, P_LO, P_HI, R, TIES = (RandomDirections.P, RandomDirections.P_LO, RandomDirections.P_HI, RandomDirections.R,
                              RandomDirections.TIES)
    ABOVE = RandomDirections.ABOVE
    NULL_MEDIAN, NULL_Q95, PCT = RandomDirections.NULL_MEDIAN, RandomDirections.NULL_Q95, RandomDirections.PCT
    NULL_MEAN, NULL_SD = RandomDirections.NULL_MEAN, RandomDirections.NULL_SD
    SATURATED, TIE_BOUND = "saturated", "tie_bound"
    P_HOLM, P_HOLM_LO, P_HOLM_HI = "p_holm", "p_holm_lo", "p_holm_hi"  # Holm across the depth (the figures' marks)
    MC_SIG = "mc_sig"  # Holm decision of the random-direction null alone
    SIDE = "side"  # the side condition (tilt > 0, rho > 0.5; tilt < 0 for a lower test): yes / no / undecided
    SIG = "sig"  # the per-layer mark: Holm yes, the side condition holds, not saturated
    # the lead among F's other eigen-directions of its kind (:class:`~powerlens.analysis.nulls.EigenDirections`):
    # members, members it beats, ties, randomised rank, percentile
    EIG_M, EIG_BEATEN, EIG_TIED, EIG_RANK, EIG_PCT = EigenDirections().fields[:5]
    # a test's fields, in the order a dynamics table holds them: against the random directions, against each
    # ranking null (a test with ``ranked``), then Holm across the depth and the marks
    RANDOM = RandomDirections.FIELDS
    FAMILY = (P_HOLM, P_HOLM_LO, P_HOLM_HI, MC_SIG, TIE_BOUND, SIDE, SATURATED, SIG)


class Sums:
    """The per-depth values of a dynamics table that are not a test's (:func:`powerlens.analysis.dynamics.
    layer_stats` writes them; figures, tables and claims read them by these names). ``layer`` and
    ``unique_layer`` key every per-layer table of a run, spectra and steering too."""

    LEADING_TYPE, LEADING_TYPE_M = "leading_type", "leading_type_M"  # F's and M = I + F's leading eigenvalue kind
    N_TOKENS, N_PROMPTS = "n_tokens", "n_prompts"
    # consensus and rotation (C5's figures): mean pairwise cos and |cos|, alignment with the lead planes of F and M
    PAIRWISE_COS, PAIRWISE_ABS_COS = "pairwise_cos", "pairwise_abs_cos"
    SPAN12, SPAN_M, SPAN_M_DIM = "span12_alignment", "span_M_alignment", "span_M_dim"
    MEAN_DTHETA, ROTATION_PLANE, ARG_LAMBDA1, ARG_MU1 = "mean_dtheta", "rotation_plane", "arg_lambda1", "arg_mu1"
    PREDICTED_DTHETA = "predicted_dtheta"
    # the consensus subspace at the final step against random subspaces of its dimension (C5 (b))
    SPAN_M_FINAL = "span_M_final"
    SPAN_M_FINAL_Q99, SPAN_M_FINAL_SATURATED = "span_M_final_null_q99", "span_M_final_saturated"
    # secondary token- and prompt-level tests of F's lead (named as such, never a verdict's basis)
    RHO_TOKEN_SIGN, RHO_PROMPT_SIGN = "rho_p_token_sign", "rho_p_prompt_sign"
    TILT_PROMPT_WILCOXON = "tilt_p_prompt_wilcoxon"
    SECONDARY = (RHO_TOKEN_SIGN, RHO_PROMPT_SIGN, TILT_PROMPT_WILCOXON)
    ATTN_ENTROPY, BIAS_RATIO = "attn_entropy_rel", "bias_ratio"  # the attention-only law's diagnostics

    @staticmethod
    def of(stat: str, direction: str) -> str:
        """gamma, rho or the tilt against a named direction (F's ``lead``, ``lead_M``, ``lead_Ft``, ``null_eig``:
        :data:`powerlens.analysis.dynamics.directions.NAMED`): ``gamma``, ``rho_M``, ``gamma_null_eig``..."""
        return stat + ("" if direction == "lead" else "_" + direction.removeprefix("lead_"))

    @staticmethod
    def span_m_final(field: str) -> str:
        """The final step's consensus test's column of one :class:`Field` (``span_M_final_p``...)."""
        return f"{Sums.SPAN_M_FINAL}_{field}"


@dataclass(frozen=True)
class TestSpec:
    """One per-layer test: a probe, a statistic and a tail (``upper``: larger than the null; ``lower``: smaller).
    ``ranked``: the lead's rank among each ranking null's members is recorded (:data:`~powerlens.analysis.nulls.
    RANKING`: F's other eigen-directions of its kind, and any null registered beside it; specificity).
    ``suffix``: the same test on another run's columns in the same table (the bias-free control's ``_nobias``,
    :func:`control_spec`)."""

    probe: str
    stat: str
    tail: str = "upper"
    ranked: bool = False
    suffix: str = ""

    @property
    def _stat_column(self) -> str:
        return {"layer": self.stat, "layer_M": f"{self.stat}_M", "layer_Ft": f"{self.stat}_Ft",
                "attn": f"attn_{self.stat}", "ffn": f"ffn_{self.stat}", "first": f"first_lead_{self.stat}"}[self.probe]

    @property
    def value(self) -> str:
        """The statistic's value column (shared by both tails): ``tilt``, ``rho_M``, ``attn_tilt``..."""
        return self._stat_column + self.suffix

    @property
    def prefix(self) -> str:
        """The prefix of the test's own columns (and the key of its tie-break): the statistic, ``_neg`` for a
        lower test."""
        return self._stat_column + ("_neg" if self.tail == "lower" else "")

    def col(self, field: str) -> str:
        return f"{self.prefix}_{field}{self.suffix}"

    @property
    def fields(self) -> tuple[str, ...]:
        """The test's fields (:class:`Field`): a lower test has no null median or 95th percentile of its own (the
        upper test of the same value has them)."""
        rand = tuple(f for f in Field.RANDOM if not (self.tail == "lower" and f in (Field.NULL_MEDIAN,
                                                                                     Field.NULL_Q95)))
        ranks = tuple(f for n in RANKING.values() for f in n.fields) if self.ranked else ()
        return rand + ranks + Field.FAMILY

    @property
    def columns(self) -> tuple[str, ...]:
        """The test's columns in a dynamics table: its value, then ``<prefix>_<field>`` for each of its fields."""
        return (self.value, *(self.col(f) for f in self.fields))

    @property
    def threshold(self) -> float | None:
        return THRESHOLD[self.stat]


GAMMA = TestSpec("layer", "gamma")
RHO = TestSpec("layer", "rho", ranked=True)
TILT = TestSpec("layer", "tilt", ranked=True)
ATTN_TILT = TestSpec("attn", "tilt", ranked=True)
ATTN_TILT_NEG = TestSpec("attn", "tilt", "lower", ranked=True)
FFN_TILT = TestSpec("ffn", "tilt", ranked=True)
FFN_TILT_NEG = TestSpec("ffn", "tilt", "lower", ranked=True)
FIRST_GAMMA = TestSpec("first", "gamma")
GAMMA_M, RHO_M, TILT_M = (TestSpec("layer_M", s) for s in ("gamma", "rho", "tilt"))  # M = I + F's lead
GAMMA_FT, RHO_FT, TILT_FT = (TestSpec("layer_Ft", s) for s in ("gamma", "rho", "tilt"))  # F~'s (pre-norm models)
TESTS: tuple[TestSpec, ...] = (GAMMA, RHO, TILT, ATTN_TILT, ATTN_TILT_NEG, FFN_TILT, FFN_TILT_NEG, FIRST_GAMMA,
                               GAMMA_M, RHO_M, TILT_M, GAMMA_FT, RHO_FT, TILT_FT)


CONTROL_SUFFIX = "_nobias"


def control_spec(spec: TestSpec) -> TestSpec:
    """The test on the bias-free control's columns (suffix ``_nobias``): the random-direction null alone."""
    return replace(spec, ranked=False, suffix=CONTROL_SUFFIX)


def spec_of(prefix: str) -> TestSpec:
    """The test whose column prefix is ``prefix`` (``tilt``, ``attn_tilt_neg``...)."""
    for t in TESTS:
        if t.prefix == prefix:
            return t
    raise KeyError(f"no verdict test has the column prefix {prefix!r}")


AT_LEAST, FEWER_THAN, NOT_LAST, BELOW_ALL = "at_least", "fewer_than", "not_last", "below_all"


@dataclass(frozen=True)
class Reading:
    """How one part of a claim's criterion reads one test (see the module's docstring). ``share_key``: the
    config ``claims:`` key holding the share of layers (None: u = 1); ``bound_key``: the key holding a bound
    (``below_all``); ``specific``: the specificity p across the model is part of it."""

    claim: str
    part: str
    mode: str
    test: TestSpec
    rule: str
    share_key: str | None = None
    specific: bool = False
    bound_key: str | None = None

    def u(self, L: int, crit: dict) -> int:
        """The count of layers the part needs (``at_least``) or must stay under (``fewer_than``)."""
        from powerlens.analysis.across_layers import layers_needed

        return 1 if self.share_key is None else layers_needed(float(crit[self.share_key]), L)

    def holm_k(self, L: int, crit: dict) -> int:
        """The multiplier of the smallest p in this part's decision: L - u + 1 (partial conjunction), L (Holm's
        first step, for a Holm count), 1 (one test)."""
        return {AT_LEAST: L - self.u(L, crit) + 1, FEWER_THAN: L, NOT_LAST: 1}.get(self.rule, 1)

    def level(self, L: int) -> float:
        """Each layer's interval level in this part's decision: 1 - 0.01 / L for a claim over the layers (the
        partial conjunction's simultaneous interval), 99% for a Holm count or one test."""
        from powerlens.analysis.across_layers import claim_level

        return claim_level(L) if self.rule == AT_LEAST else dc.LEVEL

    def needs_draws(self) -> bool:
        return self.rule in (AT_LEAST, FEWER_THAN, NOT_LAST)


READINGS: tuple[Reading, ...] = (
    Reading("C1", "", "attention-only", TILT, AT_LEAST, "C1_share_layers", specific=True),
    Reading("C6", "(a)", "model", GAMMA, AT_LEAST),
    Reading("C6", "(b)", "model", GAMMA, BELOW_ALL, bound_key="C6_weak_below"),
    Reading("C6", "(c)", "model", FIRST_GAMMA, NOT_LAST),
    Reading("C7", "", "model", RHO, AT_LEAST, "C7_share_layers", specific=True),
    Reading("C10", "attention", "model", ATTN_TILT, AT_LEAST, "C1_share_layers", specific=True),
    Reading("C10", "FFN", "model", FFN_TILT_NEG, FEWER_THAN, "C10_ffn_negative_below"),
)


def criteria_keys() -> tuple[str, ...]:
    """The config ``claims:`` keys the readings read (shares of layers, bounds): all the dynamics step receives
    of ``claims:``, so editing another criterion (C9's, C8's) reruns no dynamics job."""
    return tuple(sorted({k for r in READINGS for k in (r.share_key, r.bound_key) if k is not None}))


def readings(mode: str | None = None, claim: str | None = None) -> tuple[Reading, ...]:
    return tuple(r for r in READINGS if (mode is None or r.mode == mode) and (claim is None or r.claim == claim))


def reading(claim: str, part: str = "") -> Reading:
    return next(r for r in READINGS if r.claim == claim and r.part == part)


def read_tests(mode: str) -> set[TestSpec]:
    """The tests some criterion reads in this mode: the only ones whose draws are ever extended."""
    return {r.test for r in readings(mode) if r.needs_draws()}


def decision_rule(claims: dict, alpha: float, null_draws_cap: int) -> dict:
    """What a verdict is decided by: the config's ``claims:`` numbers with the test level (``dynamics.alpha``)
    and the draw cap (``dynamics.null_draws_cap``) beside them. The one path both take into the analysis: every
    step that decides or draws a test builds it here, and every reader reads ``crit["alpha"]`` and
    ``crit["null_draws_cap"]``."""
    return {**claims, "alpha": float(alpha), "null_draws_cap": int(null_draws_cap)}


def first_draws(mode: str, L: int, crit: dict, configured: int) -> int:
    """R0 from the rule (paper.md section 4d): the smallest count at which every rule read in this mode can reach
    significance (k times the upper bound of zero exceedances out of R0 below alpha, at the part's level), at
    least the
    configured ``null_draws``; a rule the cap cannot reach asks nothing (its part is underpowered)."""
    from powerlens.analysis.across_layers import draws_to_reach

    need = [draws_to_reach(r.holm_k(L, crit), crit["alpha"], int(crit["null_draws_cap"]), r.level(L))
            for r in readings(mode) if r.needs_draws()]
    return max([int(configured)] + [n for n in need if n is not None])


def tested(df, spec: TestSpec):
    """The rows of a dynamics table where ``spec`` was tested (its p is defined): the model's own depth for a
    test the run has, no rows for one it has not."""
    c = spec.col(Field.P)
    return df[df[c].notna()] if c in df else df.iloc[:0]


def saturated(d, spec: TestSpec):
    """Per row: the test is saturated there (half or more of the draws tie with the lead); False without the
    column."""
    import pandas as pd

    c = spec.col(Field.SATURATED)
    return d[c].fillna(False).astype(bool) if c in d else pd.Series(False, index=d.index)


def layer_marks(d, spec: TestSpec, *, alpha: float, above: float = -np.inf):
    """Per row, the test's per-layer mark (yes / no / undecided): the decided ``<test>_sig`` where the table has
    it; else (the bias-free control's columns) Holm's p below ``alpha`` with the value above ``above``, saturated
    layers never counted. The one reading of the marks: the claims' counts, the tables and the figures."""
    import pandas as pd

    if spec.col(Field.SIG) in d:
        return d[spec.col(Field.SIG)].fillna(dc.NO).astype(str)
    if spec.col(Field.P_HOLM) in d:
        ok = (d[spec.col(Field.P_HOLM)] < alpha) & (d[spec.value] > above) & ~saturated(d, spec)
        return ok.map({True: dc.YES, False: dc.NO})
    return pd.Series(dc.NO, index=d.index, dtype=object)


def own_depth(df):
    """The rows of the model's own depth in a dynamics table: those the verdict tests were taken on (a long
    shared-weight run's later steps have values, no test). The one definition every reader uses."""
    for spec in (TILT, RHO, GAMMA):
        if spec.col(Field.P) in df:
            return tested(df, spec)
    return df


@dataclass(frozen=True)
class LayerTests:
    """One test's columns over a model's own depth, as arrays (what a criterion reads)."""

    spec: TestSpec
    value: np.ndarray
    p: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    side: np.ndarray  # object: yes / no / undecided
    saturated: np.ndarray
    sig: np.ndarray  # object: the per-layer Holm mark (yes / no / undecided)
    mc_sig: np.ndarray
    R: np.ndarray
    ties: np.ndarray  # the share of the draws tied with the lead
    above: np.ndarray  # the draws beyond the lead
    tie_bound: np.ndarray
    ranks: dict  # ranking null's key -> its fields' columns (the lead's rank among its members per layer)
    layers: np.ndarray

    @property
    def L(self) -> int:
        return len(self.value)

    def simultaneous(self) -> tuple[np.ndarray, np.ndarray]:
        """Each layer's Clopper-Pearson interval at level 1 - 0.01 / L (paper.md section 4e): together they
        cover all L layers' p at once with 99% probability (Bonferroni), so the claim's interval built from them
        is a 99% statement about the claim."""
        from powerlens.analysis.across_layers import claim_level

        level = claim_level(self.L)
        ends = [dc.mc_interval(int(a), int(round(s * r)), int(r), level) if r > 0 and not np.isnan(a) else
                (np.nan, np.nan) for a, s, r in zip(self.above, self.ties, self.R)]
        return (np.array([e[0] for e in ends], dtype=float).reshape(-1),
                np.array([e[1] for e in ends], dtype=float).reshape(-1))

    def claim_p(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-layer (p, lo, hi) for a claim "at least u layers", the interval simultaneous over the layers
        (:meth:`simultaneous`): 1 where the side condition fails or the layer is saturated (no evidence), the
        upper end 1 where the side condition is undecided (within rounding)."""
        no = (self.side == dc.NO) | self.saturated | np.isnan(self.value)
        und = self.side == dc.UNDECIDED
        s_lo, s_hi = self.simultaneous()
        p = np.where(no, 1.0, self.p)
        lo = np.where(no, 1.0, s_lo)
        hi = np.where(no | und, 1.0, s_hi)
        return p, lo, hi


def layer_tests(df, spec: TestSpec) -> LayerTests | None:
    """The test's columns of a dynamics table, over the model's own depth (rows where the test has a p); None if
    the table has no such test."""
    if spec.col(Field.P) not in df:
        return None
    d = df[df[spec.col(Field.P)].notna()]

    def num(field: str, fill: float = np.nan) -> np.ndarray:
        c = spec.col(field)
        return d[c].to_numpy(dtype=float) if c in d else np.full(len(d), fill)

    def word(field: str) -> np.ndarray:
        c = spec.col(field)
        return (d[c].fillna(dc.NO).astype(str).to_numpy(dtype=object) if c in d else
                np.full(len(d), dc.NO, dtype=object))

    sat = d[spec.col(Field.SATURATED)].fillna(False).astype(bool).to_numpy() if spec.col(Field.SATURATED) in d \
        else np.zeros(len(d), dtype=bool)
    tb = d[spec.col(Field.TIE_BOUND)].fillna(False).astype(bool).to_numpy() if spec.col(Field.TIE_BOUND) in d \
        else np.zeros(len(d), dtype=bool)
    side = word(Field.SIDE) if spec.col(Field.SIDE) in d else np.full(len(d), dc.YES, dtype=object)
    return LayerTests(spec=spec, value=d[spec.value].to_numpy(dtype=float), p=num(Field.P), lo=num(Field.P_LO),
                      hi=num(Field.P_HI), side=side, saturated=sat, sig=word(Field.SIG), mc_sig=word(Field.MC_SIG),
                      R=num(Field.R, 0), ties=num(Field.TIES, 0), above=num(Field.ABOVE),
                      tie_bound=tb, layers=d["layer"].to_numpy(dtype=int),
                      ranks={k: {f: num(f, 0) for f in n.fields} for k, n in RANKING.items()})
