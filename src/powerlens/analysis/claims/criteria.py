"""Each claim's criterion as a small function of one model's tables, returning a :class:`Verdict`; the
synthetic-layer claims (C2-C4) from the theory records."""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from powerlens.analysis import decisions as dc
from powerlens.analysis.claims import flip as fl
from powerlens.analysis.verdict_tests import Field, Sums
from powerlens.core.fmt import fmt_num
from powerlens.models.archs import PAPER_MODELS


class Beside(NamedTuple):
    """The same criterion read in the claim's other mode (C1's real forward pass, C9's attention-only law): shown
    beside the verdict, never part of it. ``where`` names the mode, ``word`` is the verdict word the criterion
    gives there and ``p`` its claim p (NaN where the criterion has none)."""

    where: str
    word: str
    p: float = float("nan")


class Verdict(NamedTuple):
    """One model's result on one criterion: pass or not, the measured value, the null it was judged against,
    and, when it fails, which part of the criterion failed (short, for the verdict view). ``inconclusive``:
    the outcome rests on tests that stay undecided after the Monte Carlo extension, or on a quantity within
    rounding of its threshold (paper.md section 4c); ``underpowered``: why the criterion could not have passed,
    or why its pass rests on a clause that could not have failed (paper.md section 4d); ``ok`` is then False and
    ``failed`` says why. ``claim_p``, ``attainable``, ``specificity``: the claim's one p, the smallest p its rule
    could produce at this resolution and the specificity p across the model (paper.md section 4d), in words;
    ``p``, ``p_floor``, ``p_spec`` the same three as numbers (NaN where the rule has none) and ``failed_parts``
    each failed part on its own: what a reader's output takes without reading the words back."""

    ok: bool
    measured: str
    null: str
    failed: str = ""
    inconclusive: bool = False
    flip: str = ""  # what would have to change for the verdict to flip (:mod:`powerlens.analysis.claims.flip`)
    underpowered: str = ""
    claim_p: str = "-"
    p_short: str = "-"  # the claim's p alone (the verdict view's cells)
    attainable: str = "-"
    specificity: str = "-"
    p: float = float("nan")
    p_floor: float = float("nan")
    p_spec: float = float("nan")
    failed_parts: tuple[str, ...] = ()
    beside: Beside | None = None  # the other mode's reading (never part of the verdict)

    def cannot_pass(self, why: str) -> "Verdict":
        """This verdict made "underpowered": ``why`` (in numbers) is the reason and the one failed part."""
        return self._replace(ok=False, inconclusive=False, underpowered=why, failed=why, failed_parts=(why,))

    @property
    def first_failed(self) -> str:
        """The first part that failed (or why it is inconclusive or underpowered); "" where it passed."""
        return "" if self.ok else self.failed_parts[0] if self.failed_parts else self.failed

    @property
    def word(self) -> str:
        """The verdict word of paper.md sections 4b and 4d (revision 5)."""
        return (INCONCLUSIVE if self.inconclusive else UNDERPOWERED if self.underpowered else
                REPRODUCED if self.ok else NOT_REPRODUCED)

    @property
    def failed_outright(self) -> bool:
        """Decided "not reproduced" (no undecided test, the criterion had power)."""
        return not self.ok and not self.inconclusive and not self.underpowered


REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_JUDGED = "reproduced", "not reproduced", "inconclusive", "not judged"
UNDERPOWERED = "underpowered"
#: Where a claim is judged (:attr:`powerlens.analysis.claims.registry.Claim.judged_in`) and where its other reading
#: (:class:`Beside`) is read: the paper's attention-only law, the model's real forward pass, the synthetic layers.
LAW, REAL_PASS, SYNTHETIC = "attention-only law", "real forward pass", "synthetic layers"


def verdict(state: str, measured: str, null: str, failed: list[str], undecided: list[str] = (), flip: str = ""
            ) -> Verdict:
    """A Verdict from a criterion's tri-state (:func:`powerlens.analysis.decisions.both` of its parts) and its
    failed (and undecided) parts, each on its own."""
    if state == dc.YES:
        return Verdict(True, measured, null, flip=flip)
    if state == dc.NO:
        return Verdict(False, measured, null, "; ".join(failed), flip=flip, failed_parts=tuple(failed))
    why = list(undecided) or list(failed)
    return Verdict(False, measured, null, "; ".join(why), inconclusive=True, flip=flip, failed_parts=tuple(why))


FIG = {"C1": "fig_tilt, table_alignment", "C2": "fig_theory (a)", "C3": "fig_theory (b)", "C4": "fig_theory (d)",
       "C5": "fig_spectra, fig_albert_consensus, fig_albert_rotation", "C6": "fig_gamma", "C7": "fig_rho",
       "C8": "fig_gamma_gap, fig_gap", "C9": "fig_steering", "C10": "fig_tilt (sublayers), table_alignment"}


TEXT = {
    "C1": "Attention + normalisation tilt tokens towards v_{1,t} at each layer (read: in at least half the layers)",
    "C2": "Shared weights, real strictly dominant lambda_1: consensus on v_1",
    "C3": "Dominant complex pair: limit cycle in span(Re v_1, Im v_1)",
    "C4": "Bipartite consensus possible but unstable with several heads",
    "C5": "ALBERT: fast consensus; base/large real lambda_1 close to lambda_2; xlarge/xxlarge complex",
    "C6": "Layer-varying models: gamma_t positive but weak; no accumulation towards one eigenvector",
    "C7": "rho_t > 0.5 consistently, with significance",
    "C8": "Weak gamma comes from small spectral gaps",
    "C9": "A large rank-1 change of the last layer aligns all tokens with a chosen u",
    "C10": "The analogy holds with the FFN disregarded",
}

CONTROL_SENTENCE = ("its matched controls (random attention weights at the trained |lambda_1| and score scale, "
                    "everything else trained) pass in every seed as well: this test does not need trained attention, "
                    "so its pass says nothing about training")


def _f(x: float) -> str:
    return fmt_num(x)


def c5(final: pd.Series, leading_type: str, size: str | None, crit: dict, types: dict[str, str]) -> Verdict:
    """Consensus, its alignment with M's consensus subspace beyond the null's 99th percentile, leading type
    (``types``: the paper's leading type per size, the family adapter's ``paper_leading_types``; ``size`` from
    :func:`albert_size`). A quantity within 1e-6 (relative) of its threshold is undecided (section 4c)."""
    consensus, aligned, q99 = (float(final[c]) for c in (Sums.PAIRWISE_ABS_COS, Sums.SPAN_M_FINAL,
                                                         Sums.SPAN_M_FINAL_Q99))
    cons = dc.compare(consensus, crit["C5_consensus_abs_cos"], strict=False)
    span = dc.compare(aligned, q99)
    expected = types.get(size or "")
    typ = dc.NO if expected is None else dc.YES if leading_type.startswith(expected) else dc.NO
    word = {dc.YES: "yes", dc.NO: "no", dc.UNDECIDED: "within 1e-6 of the threshold"}
    measured = (f"(a) final mean pairwise |cos| {_f(final[Sums.PAIRWISE_ABS_COS])}: {word[cons]}; "
                f"(b) alignment with span of M ({int(final[Sums.SPAN_M_DIM])}-D) {_f(final[Sums.SPAN_M_FINAL])}: "
                f"{word[span]}; (c) leading type {leading_type}"
                + (f", expected {expected} for {size}: {word[typ]}" if expected else
                   ": not judged (the configuration is not one of the four albert-*-v2 sizes), so C5 is not "
                   "reproduced for this model"))
    null = (f"random {int(final[Sums.SPAN_M_DIM])}-D subspaces: q99 {_f(final[Sums.SPAN_M_FINAL_Q99])}, "
            f"median {_f(final[Sums.span_m_final(Field.NULL_MEDIAN)])}")
    parts = (("(a) consensus", cons), ("(b) alignment with M's span", span),
             ("(c) leading type" if expected else "(c) not judged (size unknown)", typ))
    failed = [p for p, x in parts if x == dc.NO]
    flip = fl.join([(fl.threshold(consensus, crit["C5_consensus_abs_cos"], "(a) |cos|"), cons),
                    (fl.threshold(aligned, q99, "(b) alignment"), span),
                    (f"(c) the leading type would have to {'change' if typ == dc.YES else 'be ' + str(expected)}"
                     if expected else "", typ)], dc.both(cons, span, typ))
    return verdict(dc.both(cons, span, typ), measured, null, failed,
                   [f"{p} within 1e-6 of its threshold" for p, x in parts if x == dc.UNDECIDED], flip)


def c4(theory: list[dict], crit: dict) -> Verdict | None:
    """(i) Unstable bipartite equilibria (by linearisation) more frequent with several heads than with one,
    stratum by stratum of the configured sharpness x (size, seed) block (one-sided exact conditional test), with a
    positive control classified unstable, and (ii) "rare": with several heads, random starts end bipartite in a
    share whose block-bootstrap 95% upper bound is below ``crit["C4_rare_share"]``:
    :func:`powerlens.analysis.theory.verdicts.c4_verdict`, the one place table_theory takes it from too.
    Underpowered where these cell counts could not reach alpha."""
    from powerlens.analysis.theory.verdicts import c4_verdict

    alpha = crit["alpha"]
    v = c4_verdict(theory, alpha, crit["C4_rare_share"])
    if v is None:
        return None
    flip = fl.threshold(v["p"], alpha, "stratified p", above=False)
    out = verdict(v["state"], v["measured"], v["null"], v["failed"], v["failed"], flip)
    out = out._replace(claim_p=f"p {_f(v['p'])} (exact conditional over the strata, one-sided)", p_short=_f(v["p"]),
                       attainable=_f(v["attainable"]), p=float(v["p"]), p_floor=float(v["attainable"]))
    if not v["powered"]:
        why = f"the strata's cell counts allow no p below {_f(v['attainable'])}"
        out = out.cannot_pass(why)
    return out


def c23(theory: list[dict], claim: str) -> Verdict | None:
    """C2 or C3 from the sweep (:func:`powerlens.analysis.theory.verdicts.c23_verdict`)."""
    from powerlens.analysis.theory.verdicts import C23_SHARE, CONTROL_TOL, c23_verdict

    v = c23_verdict(theory, claim)
    if v is None:
        return None
    what = "consensus on v_1" if claim == "C2" else "the leading plane"
    ctl = v["control"]
    measured = (f"clustered starts reaching {what}, per sharpness: {v['shares']}; positive control (uniform "
                f"attention, the power method): {ctl['quantity']} measured {ctl['measured']:.6g}, "
                f"predicted {ctl['predicted']:.6g} (relative error {_f(v['control_rel_error'])})")
    ends = [r["detail"].get("isotropic_endings") for r in v["sweep"]]
    if all(ends):
        keys = list(ends[0])
        measured += "; isotropic starts end: " + "; ".join(
            f"|score| {r['detail']['sharpness']:g}: " + ", ".join(f"{k} {e[k]}" for k in keys if e[k])
            for r, e in zip(v["sweep"], ends))
    elif claim == "C3":
        measured += "; isotropic starts reaching the plane: " + "; ".join(
            f"|score| {r['detail']['sharpness']:g}: {r['detail']['isotropic_reach_plane']} of {r['detail']['seeds']}"
            for r in v["sweep"])
    failed = [p for p, bad in (
        (f"positive control off by {_f(v['control_rel_error'])}", not ctl["passed"]),
        (f"a sharpness where only {v['weakest']:.0%} of the seeds reach {what}", v["weakest"] < C23_SHARE)) if bad]
    flip = ("a sharpness would have to fall below " + f"{C23_SHARE:.0%} of the seeds" if v["ok"] else
            f"every sharpness would have to reach {C23_SHARE:.0%} of the seeds (and the control {_f(CONTROL_TOL)})")
    return Verdict(v["ok"], measured, "analytic prediction (the control); the claim's own end state (the sweep)",
                   "; ".join(failed), flip=flip, failed_parts=tuple(failed))


def theory_verdicts(theory: list[dict], crit: dict) -> dict[str, tuple[str, Verdict]]:
    """C2, C3 and C4 from the synthetic-layer checks: claim -> (criterion, verdict), by the decision rule ``crit``
    (alpha, ``C4_rare_share``). The one place both table_claims and table_theory take these verdicts from, so the
    two tables cannot disagree."""
    from powerlens.analysis.theory.verdicts import C2_LINE_TOL, C3_DIST_TOL, C23_SHARE, CONTROL_TOL, RESIDUAL

    out: dict[str, tuple[str, Verdict]] = {}
    for claim, what in (("C2", f"every token within {C2_LINE_TOL:g} of one side of the line of M's v_1"),
                        ("C3", f"every token within {C3_DIST_TOL:g} of M's leading plane")):
        v = c23(theory, claim)
        if v is not None:
            out[claim] = (f"softmax attention at every sharpness of the sweep, clustered starts: {what} in at least "
                          f"{C23_SHARE:.0%} of the weight seeds (a residual at the last step); uniform attention, "
                          f"the power method, as positive control: the analytic "
                          f"{'rate' if claim == 'C2' else 'angle'} to {CONTROL_TOL:g}", v)
    r = c4(theory, crit)
    if r:
        out["C4"] = ("over a sweep of sizes, head counts, attention sharpness and weight seeds: the bipartite "
                     "equilibrium continued from +-v_1 along the sharpness by Newton's method (residual < "
                     f"{RESIDUAL:g}, our deviation from 1e-12: rounding), classified by the spectral radius of one law "
                     "step's Jacobian on the tangent space (unstable > 1 + 1e-6); (i) unstable more often with "
                     "several heads than with one, stratum by stratum of the configured sharpness x (size, seed) "
                     f"block, one-sided exact conditional test < {crit['alpha']} (a sign test over the blocks "
                     "beside it), with a positive control (a known unstable equilibrium) classified unstable; AND "
                     "(ii) rare: with several heads, the share of isotropic random starts ending in two antipodal "
                     "groups, pooled over the sweep, has a block-bootstrap 95% upper bound below "
                     f"{crit['C4_rare_share']:g}", r)
    return out


def albert_size(meta: dict) -> str | None:
    """The paper's size of a shared-weight model (C5 (c)), as its family's adapter recognises it from the
    configuration (:meth:`powerlens.models.adapters.base.Adapter.paper_size`); None outside the paper's sizes."""
    from powerlens.models.adapters import ADAPTERS

    adapter = ADAPTERS.get(meta.get("arch"))
    return adapter.paper_size(meta, PAPER_MODELS) if adapter is not None else None
