"""The criteria read on the token dynamics (C1, C6, C7, C8, C10: paper.md sections 4b and 4d), each a small
function of one model's per-layer tables returning a :class:`~powerlens.analysis.claims.criteria.Verdict`: one
p per claim (the partial conjunction over layers), the specificity p across the model, the smallest p each
rule could reach at this resolution ("underpowered" where it could not pass, or where a pass rests on a clause
that could not fail), and the per-layer Holm marks the figures draw (:class:`Count`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from powerlens.analysis import decisions as dc
from powerlens.analysis.claims import flip as fl
from powerlens.analysis.claims.criteria import REAL_PASS, Beside, Verdict, verdict
from powerlens.analysis.parts import Part, evaluate
from powerlens.analysis.verdict_tests import (
    AT_LEAST,
    ATTN_TILT,
    ATTN_TILT_NEG,
    FEWER_THAN,
    FFN_TILT,
    GAMMA,
    NOT_LAST,
    RHO,
    TILT,
    Field,
    TestSpec,
    layer_marks,
    layer_tests,
    own_depth,
    readings,
    saturated,
)
from powerlens.core.fmt import fmt_num

RANDOM_NULL = "random directions (Monte Carlo, partial conjunction over layers)"
SPECIFIC_NULL = ("F's other eigen-directions of the lead's kind (|lambda| > 1e-9 |lambda_1|): the lead's ranks summed "
                 "across the model, against independent layers and among the members' chains across layers, the "
                 "larger p (our modelling choice)")
BOTH_NULLS = f"{RANDOM_NULL}; specificity against {SPECIFIC_NULL}"

def _f(x: float) -> str:
    return fmt_num(x)


class Count(NamedTuple):
    """Layers of the model's own depth whose per-layer Holm mark ``<col>_sig`` says yes, and undecided, out of
    ``of`` (the figures' marks; a claim's verdict reads one p, :func:`parts`)."""

    yes: int
    undecided: int
    of: int
    saturated: int
    max_R: int

    def text(self) -> str:
        extra = [f"{self.undecided} undecided at R = {self.max_R}" if self.undecided else "",
                 f"{self.saturated} saturated, not counted" if self.saturated else ""]
        extra = [e for e in extra if e]
        return f"{self.yes} of {self.of}" + (f" ({'; '.join(extra)})" if extra else "")


def count(g: pd.DataFrame, spec: TestSpec, *, alpha: float, above: float = -np.inf) -> Count:
    """Per-layer Holm marks of a test (:func:`~powerlens.analysis.verdict_tests.layer_marks`) over the model's
    own depth: layers marked yes, undecided, of, saturated, and the most draws any layer got."""
    d = own_depth(g)
    s = layer_marks(d, spec, alpha=alpha, above=above)
    sat = int(saturated(d, spec).sum())
    r = spec.col(Field.R)
    R = int(d[r].max()) if r in d and len(d) and d[r].notna().any() else 0
    return Count(int((s == dc.YES).sum()), int((s == dc.UNDECIDED).sum()), len(d), sat, R)


def share_significant(g: pd.DataFrame, spec: TestSpec, *, alpha: float, above: float = 0.0) -> tuple[int, int]:
    """(layers whose per-layer Holm mark says significant, layers of the model's depth): the counts the figures
    annotate. ``alpha`` and ``above`` are part of each test's decision in the dynamics table already."""
    c = count(g, spec, alpha=alpha, above=above)
    return c.yes, c.of


def n_saturated(g: pd.DataFrame, spec: TestSpec) -> int:
    """Layers of the model's own depth where the test is saturated (ties with half or more of the draws)."""
    return int(saturated(own_depth(g), spec).sum())


def parts(g: pd.DataFrame | None, claim: str, crit: dict, mode: str | None = None) -> list[Part]:
    """Every part of ``claim``'s criterion (:data:`~powerlens.analysis.verdict_tests.READINGS`, those of ``mode``
    when given) on one model's dynamics table; ``crit["null_draws_cap"]``: the most draws a Monte Carlo test may
    get (the resolution the power is computed at)."""
    d = own_depth(g) if g is not None and len(g) else None
    return [evaluate(r, layer_tests(d, r.test) if d is not None else None, crit) for r in readings(mode, claim)]


def _label(x: Part) -> str:
    return f"{x.reading.part}: " if x.reading.part else ""


def _part_failed(x: Part, alpha: float) -> str:
    """What failed (or stays undecided) in one part, in numbers."""
    r = x.reading
    if r.rule == AT_LEAST:
        bits = []
        for name, t in (("random directions", x.conj), ("specificity", x.spec)):
            if t is None or t.decision == dc.YES:
                continue
            bits.append(f"{name} p {_f(t.p)} >= {alpha}" if t.decision == dc.NO else
                        f"{name} p {_f(t.p)}, its 99% interval {_f(t.lo)} to {_f(t.hi)} straddles {alpha}")
        return _label(x) + "; ".join(bits)
    if r.rule == FEWER_THAN:
        return f"{_label(x)}significant (per-layer Holm) in {x.yes} of {x.of} layers, must stay under {x.limit}" + (
            f" ({x.undecided} undecided)" if x.undecided else "")
    if r.rule == NOT_LAST:
        return f"{_label(x)}the last output is aligned with the first layer's v_1 beyond the null (p {_f(x.p)})"
    return f"{_label(x)}max {_f(x.value)} not below the bound"


def _part_flip(x: Part, alpha: float) -> str:
    r = x.reading
    if r.rule == AT_LEAST:
        out = []
        if x.conj is not None:
            out.append(fl.threshold(x.conj.p, alpha, f"{_label(x)}claim p", above=False))
        if x.spec is not None:
            out.append(fl.threshold(x.spec.p, alpha, f"{_label(x)}specificity p", above=False))
        return "; ".join(out)
    if r.rule == FEWER_THAN:
        return fl.below(x.yes, x.undecided, x.of, x.limit, f"{_label(x)}significant layers")
    if r.rule == NOT_LAST:
        return (f"{_label(x)}the last output's alignment with the first v_1 would have to "
                + ("become significant" if x.decision == dc.YES else "lose its significance"))
    return ""


def from_parts(ps: list[Part], crit: dict, measured: str, null: str, extra_failed: list[tuple[str, str]] = ()
               ) -> Verdict:
    """A Verdict from a criterion's parts (and any part judged outside them, as (text, tri-state)): the state,
    what failed, what would flip it, the claim's p, the attainable p and the specificity (paper.md section 4d).
    A part that must be significant and could not be at this resolution makes the verdict "underpowered"; so
    does a pass that rests on a clause of absence that could not fail."""
    alpha = crit["alpha"]
    states = [x.decision for x in ps] + [s for _, s in extra_failed]
    state = dc.both(*states)
    failed = ([_part_failed(x, alpha) for x in ps if x.decision == dc.NO]
              + [t for t, s in extra_failed if s == dc.NO])
    undecided = ([_part_failed(x, alpha) + ": undecided" for x in ps if x.decision == dc.UNDECIDED]
                 + [t + ": undecided" for t, s in extra_failed if s == dc.UNDECIDED])
    flip = fl.join([(_part_flip(x, alpha), x.decision) for x in ps], state)
    cannot_pass = [x for x in ps if x.reading.rule == AT_LEAST and not x.powered]
    cannot_fail = [x for x in ps if x.reading.rule in (FEWER_THAN, NOT_LAST) and not x.powered]
    reason = ""
    if cannot_pass:
        reason = "could not pass at this resolution: " + "; ".join(_label(x) + x.power for x in cannot_pass)
    elif state == dc.YES and cannot_fail:
        reason = "the pass rests on a clause that could not fail: " + "; ".join(_label(x) + x.power
                                                                                for x in cannot_fail)
    main = next((x for x in ps if x.reading.rule == AT_LEAST), None)
    claim_p = main.conj.text() if main is not None and main.conj is not None else "-"
    p_short = _f(main.conj.p) if main is not None and main.conj is not None else "-"
    conj_parts = [x for x in ps if x.reading.rule == AT_LEAST]
    attainable = "; ".join((_label(x) if len(conj_parts) > 1 else "") + _f(x.attainable) for x in conj_parts) or "-"
    spec = next((x.spec for x in ps if x.spec is not None), None)
    v = verdict(state, measured, null, failed, undecided, flip)
    if reason:
        v = v.cannot_pass(reason)
    nan = float("nan")
    return v._replace(claim_p=claim_p, p_short=p_short, attainable=attainable,
                      specificity=spec.text() if spec is not None else "-",
                      p=float(main.conj.p) if main is not None and main.conj is not None else nan,
                      p_floor=max((float(x.attainable) for x in conj_parts), default=nan),
                      p_spec=float(spec.p) if spec is not None else nan)


def c1(law: pd.DataFrame, model: pd.DataFrame | None, crit: dict) -> Verdict:
    """C1 in the attention-only law (the claim drops the FFN): the tilt a(t+1) - a(t) towards v_1 beats random
    directions in at least a share u of the L layers (one p: the partial conjunction, paper.md section 4d) AND
    the lead beats F's other eigen-directions across the model (the specificity p). The row shows beside it the
    same test in the real forward pass (never the basis of the verdict)."""
    ps = parts(law, "C1", crit)
    d = own_depth(law)
    x = ps[0]
    marks = count(law, TILT, alpha=crit["alpha"])
    measured = (f"law: claim {x.conj.text()}; specificity {x.spec.text()}; per-layer Holm marks {marks.text()}; "
                f"median tilt {_f(d[TILT.value].median())}")
    beside = None
    if model is not None and len(model):
        m = parts(model, "C1", crit)  # the same reading on the real pass's tables
        if m and m[0].conj is not None and not np.isnan(m[0].conj.p):
            measured += (f"; real forward pass (FFN included), same test: claim {m[0].conj.text()}, specificity p "
                         f"{_f(m[0].spec.p)}")
            mv = from_parts(m, crit, "", "")  # the same criterion there: beside the verdict, never part of it
            beside = Beside(REAL_PASS, mv.word, mv.p)
    null = (f"{BOTH_NULLS}; random directions: median tilt {_f(d[TILT.col(Field.NULL_MEDIAN)].median())}, q95 "
            f"{_f(d[TILT.col(Field.NULL_Q95)].median())}")
    return from_parts(ps, crit, measured, null)._replace(beside=beside)


def c6(g: pd.DataFrame, crit: dict) -> Verdict:
    """(a) gamma above the random-direction null in at least one layer (partial conjunction with u = 1, i.e.
    Bonferroni over the layers), (b) below the weak bound in every layer, and (c) no accumulation (the last
    output is not aligned with the first layer's v_1 beyond the null)."""
    ps = parts(g, "C6", crit)
    a, b, c = ps
    d = own_depth(g)
    measured = (f"(a) gamma above the null: claim {a.conj.text()} (above the null's q95, uncorrected: "
                f"{int((d[GAMMA.value] > d[GAMMA.col(Field.NULL_Q95)]).sum())} layers); (b) max gamma {_f(b.value)} "
                f"(< {crit['C6_weak_below']}: {b.decision}); (c) last output vs first v_1: {_f(c.value)} (p "
                f"{_f(c.p)}, beyond the null: {({dc.NO: 'yes', dc.YES: 'no'}).get(c.decision, 'undecided')})")
    null = (f"random directions: median gamma {_f(d[GAMMA.col(Field.NULL_MEDIAN)].median())}, q95 "
            f"{_f(d[GAMMA.col(Field.NULL_Q95)].median())}")
    return from_parts(ps, crit, measured, null)


def c7(g: pd.DataFrame, crit: dict) -> Verdict:
    """rho > 0.5 beating random directions in at least a share u of the layers (partial conjunction; saturated
    layers count as no evidence) AND the specificity p across the model, over the model's own depth."""
    ps = parts(g, "C7", crit)
    d = own_depth(g)
    x = ps[0]
    measured = (f"claim {x.conj.text()}; specificity {x.spec.text()}; per-layer Holm marks "
                f"{count(g, RHO, alpha=crit['alpha']).text()}; median rho {_f(d[RHO.value].median())}")
    null = (f"{BOTH_NULLS}; random directions: median rho {_f(d[RHO.col(Field.NULL_MEDIAN)].median())}, q95 "
            f"{_f(d[RHO.col(Field.NULL_Q95)].median())}")
    return from_parts(ps, crit, measured, null)


def c10(model: pd.DataFrame, law: pd.DataFrame | None, crit: dict) -> Verdict:
    """C10 in the real forward pass, split at the sublayers: the attention sublayer's tilt beats random
    directions in at least a share u of the layers (partial conjunction) with the specificity p, AND the FFN
    sublayer's tilt is significantly negative (per-layer Holm) in fewer than a quarter of them (a clause of
    absence: checked for whether it could fail). The law's claim p is C1's, shown for reference."""
    if ATTN_TILT.col(Field.P) not in model:
        return Verdict(False, "no sublayer tilts in this run's model-mode table", "-", "no sublayer tilts")
    ps = parts(model, "C10", crit)
    att, ffn = ps
    al = crit["alpha"]
    measured = (f"real forward pass: attention sublayer claim {att.conj.text()}, specificity {att.spec.text()}; "
                f"per-layer Holm marks: attention positive {count(model, ATTN_TILT, alpha=al).text()}, negative "
                f"{count(model, ATTN_TILT_NEG, alpha=al).text()}; FFN positive "
                f"{count(model, FFN_TILT, alpha=al).text()}, negative {ffn.yes} of {ffn.of} (must stay under "
                f"{ffn.limit}; {ffn.power})")
    if law is not None and len(law):
        lp = parts(law, "C1", crit)
        if lp and lp[0].conj is not None:
            measured += f"; the law (C1): claim p {_f(lp[0].conj.p)}"
    return from_parts(ps, crit, measured, f"{BOTH_NULLS}; FFN clause: random directions, Holm across layers")


#: C8's Spearman p is exact (every ordering of the layers enumerated) up to this many orderings (L = 8); past it
#: the t approximation, whose error at L >= 9 is far below alpha's resolution, floored at the exact minimum 1 / L!
EXACT_ORDERINGS = 40_320


def spearman_p(x: np.ndarray, y: np.ndarray) -> tuple[float, float, str]:
    """(rho, one-sided p for rho > 0, how): the exact permutation p over all L! orderings when there are at most
    :data:`EXACT_ORDERINGS`, else scipy's t approximation floored at 1 / L! (no p below what L layers can give:
    the invariant p >= attainable p)."""
    import math

    from scipy.stats import permutation_test, rankdata, spearmanr

    from powerlens.analysis.across_layers import spearman_attainable

    if math.factorial(len(x)) <= EXACT_ORDERINGS:
        rx = rankdata(x) - (len(x) + 1) / 2

        def rho(y_, axis=-1):  # Spearman of x with each ordering of y (ties averaged), vectorised
            ry = rankdata(y_, axis=axis) - (len(x) + 1) / 2
            return (ry * rx).sum(axis) / np.sqrt((ry ** 2).sum(axis) * (rx ** 2).sum())

        r = permutation_test((np.asarray(y, dtype=float),), rho, permutation_type="pairings", vectorized=True,
                             n_resamples=np.inf, alternative="greater")
        return float(r.statistic), float(r.pvalue), "exact, all orderings"
    r = spearmanr(x, y, alternative="greater")
    return float(r.statistic), max(float(r.pvalue), spearman_attainable(len(x))), "t approximation"


def c8(spec: pd.DataFrame, g: pd.DataFrame, alpha: float) -> Verdict:
    """Spearman correlation across layers between 1 - |lambda_next|/|lambda_1| and gamma_t - null median,
    positive and significant (one-sided; :func:`spearman_p`). Its attainable p is 1 / L! (a perfect ordering of
    L layers): with too few layers the test cannot pass ("underpowered")."""
    from powerlens.analysis.across_layers import spearman_attainable

    d = own_depth(g).merge(spec[["layer", "ratio_next"]], on="layer")
    x, y = 1 - d["ratio_next"].to_numpy(), (d[GAMMA.value] - d[GAMMA.col(Field.NULL_MEDIAN)]).to_numpy()
    floor = spearman_attainable(len(d))
    if floor >= alpha:
        why = f"{len(d)} layers: the smallest attainable p is 1/{len(d)}! = {_f(floor)} >= {alpha}"
        return Verdict(False, f"{len(d)} layers", "no correlation (one-sided Spearman test)", why,
                       underpowered=why, attainable=_f(floor), p_floor=floor)
    if len(d) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return Verdict(False, f"{len(d)} layers: correlation not defined", "-", "correlation not defined",
                       attainable=_f(floor), p_floor=floor)
    rho, p, how = spearman_p(x, y)
    ok = bool(rho > 0 and p < alpha)
    flip = fl.threshold(p, alpha, "p", above=False)
    return Verdict(ok, f"Spearman {_f(rho)} (p {_f(p)}, {how}, {len(d)} layers); median ratio beyond "
                   f"the pair {_f(float(np.median(d['ratio_next'])))}", "no correlation (one-sided Spearman test)",
                   "" if ok else f"Spearman {_f(rho)}, p {_f(p)}", flip=flip,
                   claim_p=f"p {_f(p)} (Spearman {_f(rho)}, {how}, {len(d)} layers)", p_short=_f(p),
                   attainable=_f(floor), p=p, p_floor=floor)


def tilt_summary(g: pd.DataFrame, crit: dict) -> dict:
    """table_alignment's columns of C1's reading on one model-mode table: the claim's p (partial conjunction at
    C1's share of the layers), the specificity p, the lead's mean percentile among F's other eigen-directions
    of its kind and its layers in their top 5% beside the number expected."""
    x = parts(g, "C1", crit)[0]
    if x.conj is None or x.spec is None:
        return {}
    s = x.spec
    return {"tilt claim p (partial conjunction, C1's share)": x.conj.p, "tilt specificity p": s.p,
            "tilt lead: mean percentile among F's eigen-directions": s.mean_pct,
            "tilt lead in top 5% (layers; expected)": f"{s.top5} of {s.layers}; {_f(s.top5_expected)}"}
