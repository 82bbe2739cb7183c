"""A claim part's decision from its test's columns (:class:`powerlens.analysis.verdict_tests.Reading`), what the
part could reach with perfect data (paper.md section 4d: power first), and which layers' draws could still
change it. The dynamics step calls :func:`evaluate` to decide where to extend the Monte Carlo draws; the claims
call it to judge: one function, so the draws are spent exactly where the verdict can move.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from powerlens.analysis import decisions as dc
from powerlens.analysis.across_layers import Conjunction, Specificity, claim_level, partial_conjunction, zero_upper
from powerlens.analysis.nulls import RANKING, EigenDirections
from powerlens.analysis.verdict_tests import AT_LEAST, BELOW_ALL, FEWER_THAN, NOT_LAST, LayerTests, Reading


@dataclass(frozen=True)
class Part:
    """One part of a criterion on one model. ``decision``: the part holds (yes), fails (no) or rests on tests
    still undecided (undecided). ``powered``: the part could have gone the other way at this resolution (a
    part that must be significant could pass; a clause of absence could fail); ``power`` says so in numbers.
    ``straddling``: layer indices (into the test's rows) whose intervals straddle the value that decides the
    part, most promising first; ``need``: how many of them must move to decide it."""

    reading: Reading
    decision: str
    powered: bool
    power: str
    conj: Conjunction | None = None
    specs: dict = field(default_factory=dict)  # ranking null's key -> its specificity
    yes: int = 0  # fewer_than: layers significant (per-layer Holm), undecided, of
    undecided: int = 0
    of: int = 0
    limit: int = 0
    value: float = float("nan")  # below_all: the largest value; not_last: the statistic at the last depth
    p: float = float("nan")  # not_last: its p
    straddling: tuple[int, ...] = field(default_factory=tuple)
    need: int = 0
    tau: float | None = None  # at_least: the per-layer p below which a layer counts (alpha / (L - u + 1))

    @property
    def spec(self) -> Specificity | None:
        """The specificity against F's other eigen-directions (the claims' texts read it)."""
        return self.specs.get(EigenDirections.key)

    @property
    def attainable(self) -> float:
        """The smallest p the part's rule could produce at the cap (the larger of its tests' where it has two)."""
        vals = [x.attainable for x in (self.conj, *self.specs.values()) if x is not None]
        return max(vals) if vals else float("nan")


def _fmt(x: float) -> str:
    from powerlens.core.fmt import fmt_num

    return fmt_num(x)


def evaluate(reading: Reading, lt: LayerTests | None, crit: dict) -> Part:
    """The part ``reading`` on the test columns ``lt`` (None: the run has no such test, the part fails), by the
    decision rule ``crit`` (:func:`powerlens.analysis.verdict_tests.decision_rule`: the claims' numbers, the
    level ``alpha`` and ``null_draws_cap``, the most draws a Monte Carlo test may get)."""
    alpha, r_cap = crit["alpha"], int(crit["null_draws_cap"])
    if lt is None or lt.L == 0:
        return Part(reading, dc.NO, False, "no such test in this run")
    L = lt.L
    if reading.rule == AT_LEAST:
        return _at_least(reading, lt, crit, alpha, r_cap)
    if reading.rule == FEWER_THAN:
        m = reading.u(L, crit)
        yes, und = int(np.sum(lt.sig == dc.YES)), int(np.sum(lt.sig == dc.UNDECIDED))
        decision = dc.YES if yes + und < m else dc.NO if yes >= m else dc.UNDECIDED
        floor = L * zero_upper(r_cap)  # Holm's smallest adjusted p with perfect data at the cap
        powered = m <= L and floor < alpha
        power = (f"could fail: {m} of {L} layers significant would need Holm's first step L x {_fmt(zero_upper(r_cap))}"
                 f" = {_fmt(floor)} < {alpha}" if powered else
                 f"could not fail: {m} significant layers of {L} " + (
                     "cannot exist" if m > L else f"need Holm p below {alpha}; the smallest attainable is "
                                                  f"{_fmt(floor)}"))
        order = sorted(np.flatnonzero(lt.sig == dc.UNDECIDED), key=lambda i: lt.p[i])
        return Part(reading, decision, powered, power, yes=yes, undecided=und, of=L, limit=m,
                    straddling=tuple(int(i) for i in order), need=max(0, m - yes))
    if reading.rule == NOT_LAST:
        i = L - 1
        s = str(lt.sig[i])
        decision = {dc.YES: dc.NO, dc.NO: dc.YES}.get(s, dc.UNDECIDED)
        floor = zero_upper(r_cap)
        powered = floor < alpha
        power = (f"could fail: one test, smallest attainable p {_fmt(floor)} < {alpha}" if powered else
                 f"could not fail: smallest attainable p {_fmt(floor)} >= {alpha}")
        return Part(reading, decision, powered, power, value=float(lt.value[i]), p=float(lt.p[i]),
                    straddling=(i,) if decision == dc.UNDECIDED else (), need=1 if decision == dc.UNDECIDED else 0)
    if reading.rule == BELOW_ALL:
        bound = float(crit[reading.bound_key])
        decision = dc.both(*[dc.compare(float(x), bound, above=False) for x in lt.value])
        return Part(reading, decision, True, "a bound on every layer's value (no null)",
                    value=float(np.nanmax(lt.value)))
    raise ValueError(f"unknown reading rule {reading.rule!r}")


def _at_least(reading: Reading, lt: LayerTests, crit: dict, alpha: float, r_cap: int) -> Part:
    L, u = lt.L, reading.u(lt.L, crit)
    p, lo, hi = lt.claim_p()
    conj = partial_conjunction(p, lo, hi, u, alpha, r_cap)
    specs = {k: n.across(lt.ranks[k], alpha) for k, n in RANKING.items()} if reading.specific else {}
    decision = dc.both(conj.decision, *(s.decision for s in specs.values()))
    can = [conj.attainable < alpha] + [s.attainable < alpha for s in specs.values()]
    k = L - u + 1
    power = [f"random directions: at least {u} of {L} layers, smallest attainable p {k} x "
             f"{_fmt(zero_upper(r_cap, claim_level(L)))} = {_fmt(conj.attainable)} at {r_cap} draws (each layer's "
             f"bound at 1 - 0.01/{L})"]
    for key, spec in specs.items():
        n = RANKING[key]
        power.append(f"{n.label}: " + (f"{n.nobody} in any layer: no power" if not spec.layers else
                                       f"{spec.layers} layers with {min(spec.members)}-{max(spec.members)} "
                                       f"{n.plural}, smallest attainable p {_fmt(spec.attainable)}"))
    straddling, need = (), 0
    if conj.decision == dc.UNDECIDED:
        tau = alpha / k
        straddling = tuple(int(i) for i in sorted(np.flatnonzero((lo < tau) & (hi >= tau)), key=lambda i: p[i]))
        need = max(0, u - int(np.sum(hi < tau)))
    return Part(reading, decision, all(can), f"needs p < {alpha}; " + "; ".join(power), conj=conj,
                specs=specs, straddling=straddling, need=need, tau=alpha / k)


def claim_decision(parts: list[Part]) -> str:
    """A criterion's tri-state over its parts (:func:`powerlens.analysis.decisions.both`)."""
    return dc.both(*[x.decision for x in parts])


def to_extend(parts: list[Part], extendable) -> list[tuple[Part, int]]:
    """(part, layer index) pairs whose draws could change the criterion: none once any part fails or all hold;
    else, per undecided part, its first ``need`` straddling layers that ``extendable(part, i)`` allows (an
    undecided absence clause: all of its straddling layers)."""
    if claim_decision(parts) != dc.UNDECIDED:
        return []
    out: list[tuple[Part, int]] = []
    for x in parts:
        if x.decision != dc.UNDECIDED or not x.straddling:
            continue
        ok = [i for i in x.straddling if extendable(x, i)]
        out += [(x, i) for i in (ok if x.reading.rule in (FEWER_THAN, NOT_LAST) else ok[: max(1, x.need)])]
    return out
