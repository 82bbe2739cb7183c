"""Each claim's criterion as a small function of one model's tables, returning a :class:`Verdict`; the
synthetic-layer claims (C2-C4) from the theory records."""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from powerlens.analysis import decisions as dc
from powerlens.analysis.claims import flip as fl
from powerlens.analysis.theory.verdicts import C2_REL_TOL, C3_ANGLE_TOL, C3_DIST_TOL
from powerlens.core.fmt import fmt_num
from powerlens.models.archs import PAPER_MODELS


class Verdict(NamedTuple):
    """One model's result on one criterion: pass or not, the measured value, the null it was judged against,
    and, when it fails, which part of the criterion failed (short, for the verdict view). ``inconclusive``:
    the outcome rests on tests that stay undecided after the Monte Carlo extension, or on a quantity within
    rounding of its threshold (paper.md section 4c); ``underpowered``: why the criterion could not have passed,
    or why its pass rests on a clause that could not have failed (paper.md section 4d); ``ok`` is then False and
    ``failed`` says why. ``claim_p``, ``attainable``, ``specificity``: the claim's one p, the smallest p its rule
    could produce at this resolution and the specificity p across the model (paper.md section 4d), in words."""

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


def verdict(state: str, measured: str, null: str, failed: str, undecided: str = "", flip: str = "") -> Verdict:
    """A Verdict from a criterion's tri-state (:func:`powerlens.analysis.decisions.both` of its parts)."""
    if state == dc.YES:
        return Verdict(True, measured, null, flip=flip)
    if state == dc.NO:
        return Verdict(False, measured, null, failed, flip=flip)
    return Verdict(False, measured, null, undecided or failed, inconclusive=True, flip=flip)


FIG = {"C1": "fig_tilt, table_alignment", "C2": "fig_theory (a)", "C3": "fig_theory (b)", "C4": "fig_theory (d)",
       "C5": "fig_spectra, fig_albert_consensus, fig_albert_rotation", "C6": "fig_gamma", "C7": "fig_rho",
       "C8": "fig_gap", "C9": "fig_steering", "C10": "fig_tilt (sublayers), table_alignment"}


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

CONTROL_SENTENCE = ("its matched control (random layer weights at the trained |lambda_1|) passes as well: the law "
                    "tilts for any F of this size, so this says nothing about training")


def _f(x: float) -> str:
    return fmt_num(x)


def c5(final: pd.Series, leading_type: str, size: str | None, crit: dict, types: dict[str, str]) -> Verdict:
    """Consensus, its alignment with M's consensus subspace beyond the null's 99th percentile, leading type
    (``types``: the paper's leading type per size, the family adapter's ``paper_leading_types``; ``size`` from
    :func:`albert_size`). A quantity within 1e-6 (relative) of its threshold is undecided (section 4c)."""
    cons = dc.compare(float(final["pairwise_abs_cos"]), crit["C5_consensus_abs_cos"], strict=False)
    span = dc.compare(float(final["span_M_final"]), float(final["span_M_final_null_q99"]))
    expected = types.get(size or "")
    typ = dc.NO if expected is None else dc.YES if leading_type.startswith(expected) else dc.NO
    word = {dc.YES: "yes", dc.NO: "no", dc.UNDECIDED: "within 1e-6 of the threshold"}
    measured = (f"(a) final mean pairwise |cos| {_f(final['pairwise_abs_cos'])}: {word[cons]}; "
                f"(b) alignment with span of M ({int(final['span_M_dim'])}-D) {_f(final['span_M_final'])}: "
                f"{word[span]}; (c) leading type {leading_type}"
                + (f", expected {expected} for {size}: {word[typ]}" if expected else
                   ": not judged (the configuration is not one of the four albert-*-v2 sizes), so C5 is not "
                   "reproduced for this model"))
    null = (f"random {int(final['span_M_dim'])}-D subspaces: q99 {_f(final['span_M_final_null_q99'])}, "
            f"median {_f(final['span_M_final_null_median'])}")
    parts = (("(a) consensus", cons), ("(b) alignment with M's span", span),
             ("(c) leading type" if expected else "(c) not judged (size unknown)", typ))
    failed = "; ".join(p for p, x in parts if x == dc.NO)
    flip = fl.join([(fl.threshold(float(final["pairwise_abs_cos"]), crit["C5_consensus_abs_cos"], "(a) |cos|"), cons),
                    (fl.threshold(float(final["span_M_final"]), float(final["span_M_final_null_q99"]),
                                  "(b) alignment"), span),
                    (f"(c) the leading type would have to {'change' if typ == dc.YES else 'be ' + str(expected)}"
                     if expected else "", typ)], dc.both(cons, span, typ))
    return verdict(dc.both(cons, span, typ), measured, null, failed,
                   "; ".join(f"{p} within 1e-6 of its threshold" for p, x in parts if x == dc.UNDECIDED), flip)


def c9(st: pd.DataFrame, crit: dict) -> Verdict:
    """Largest kappa: mean |cos(x, u)| >= bound, u principal, not below activation addition at matched norm."""
    r1 = st[st["method"].str.startswith("rank-1")]
    aa = st[st["method"].str.startswith("activation")]
    kmax = r1["kappa"].max()
    top = r1[r1["kappa"] == kmax].set_index("target")
    base = aa[aa["kappa"] == kmax].set_index("target")
    cos = float(top["cos_after_layer_model"].min())
    principal = bool(top["u_principal"].astype(bool).all())
    beats = bool((top["cos_after_layer_model"] >= base["cos_after_layer_model"].reindex(top.index)).all())
    smallest = r1[r1["u_principal"].astype(bool) & (r1["kappa"] > 0)].groupby("target")["kappa"].min()
    ok = cos >= crit["C9_alignment"] and principal and beats
    measured = (f"kappa {_f(kmax)}: min |cos| {_f(cos)}; u principal {'yes' if principal else 'no'}; smallest "
                f"kappa with u principal: " + (", ".join(f"{t} {_f(k)}" for t, k in smallest.items()) or "none"))
    if "post_norm_cap" in top and top["post_norm_cap"].notna().any():
        measured += (f"; a post-attention norm follows W_O: the change the residual stream receives is capped "
                     f"(cap {_f(float(top['post_norm_cap'].iloc[0]))}, change at kappa max "
                     f"{_f(float(top['change_norm_model'].max()))}) and points along p * u (min |cos| with p * u "
                     f"{_f(float(top['cos_pu_after_layer_model'].min()))})")
        if "post_norm_saturation_u" in top:
            measured += "; saturation value along u, sqrt(d) ||p * u||, against the change at kappa max: " + ", ".join(
                f"{t} {_f(float(r['post_norm_saturation_u']))} vs {_f(float(r['change_norm_model']))}"
                for t, r in top.iterrows())
    null = (f"activation addition at matched norm of change: |cos| "
            f"{_f(float(base['cos_after_layer_model'].min()))}" + ("" if beats else " (above rank-1)"))
    failed = "; ".join([p for p, bad in ((f"min |cos| {_f(cos)} < {crit['C9_alignment']}", cos < crit["C9_alignment"]),
                                         ("u not principal", not principal),
                                         ("below activation addition", not beats)) if bad])
    state = lambda bad: dc.NO if bad else dc.YES  # noqa: E731
    flip = fl.join([(fl.threshold(cos, crit["C9_alignment"], "min |cos|"), state(cos < crit["C9_alignment"])),
                    ("u would have to " + ("stop being" if principal else "become") + " principal",
                     state(not principal)),
                    ("rank-1 would have to fall below activation addition" if beats else
                     "rank-1 would have to reach activation addition", state(not beats))],
                   dc.YES if ok else dc.NO)
    return Verdict(ok, measured, null, failed, flip=flip)


def c4(theory: list[dict], alpha: float) -> Verdict | None:
    """Unstable bipartite equilibria (by linearisation) more frequent with several heads than with one, over the
    non-degenerate cells with an equilibrium (one-sided Fisher over cells), and a positive control classified
    unstable: :func:`powerlens.analysis.theory.c4_verdict`, the one place table_theory takes it from too."""
    from powerlens.analysis.theory.verdicts import c4_verdict

    v = c4_verdict(theory, alpha)
    if v is None:
        return None
    flip = fl.threshold(v["p"], alpha, "Fisher p", above=False) if v.get("p") is not None else "-"
    return verdict(v["state"], v["measured"], v["null"], v.get("failed", ""), v.get("failed", ""), flip)


def theory_verdicts(theory: list[dict], alpha: float) -> dict[str, tuple[str, Verdict]]:
    """C2, C3 and C4 from the synthetic-layer checks: claim -> (criterion, verdict). The one place both
    table_claims and table_theory take these verdicts from, so the two tables cannot disagree."""
    out: dict[str, tuple[str, Verdict]] = {}
    from powerlens.analysis.theory.verdicts import record_id

    th = {record_id(r): r for r in theory}
    a = th.get("C2.rate.full")
    if a:
        out["C2"] = (a["criterion"], Verdict(bool(a["passed"]), f"rate {_f(a['measured'])} vs |mu2/mu1| "
                                             f"{_f(a['predicted'])}", "analytic prediction",
                                             "" if a["passed"] else f"relative error {_f(a['rel_error'])}",
                                             flip=fl.threshold(a["rel_error"], C2_REL_TOL, "relative error", False)))
    b1 = th.get("C3.angle.full")
    b0 = th.get("C3.distance.full")
    if b1 and b0:
        ok = bool(b0["passed"] and b1["passed"])
        out["C3"] = (f"{b0['criterion']}; {b1['criterion']}", Verdict(
            ok, f"distance {_f(b0['measured'])}; angle {b1['measured']:.4f} vs {b1['predicted']:.4f} rad "
            f"(difference {_f(abs(b1['measured'] - b1['predicted']))})", "analytic prediction",
            "; ".join(p for p, bad in (("plane distance", not b0["passed"]), ("angle", not b1["passed"])) if bad),
            flip=fl.join([(fl.threshold(b0["measured"], C3_DIST_TOL, "distance", False),
                           dc.YES if b0["passed"] else dc.NO),
                          (fl.threshold(abs(b1["measured"] - b1["predicted"]), C3_ANGLE_TOL, "angle difference",
                                        False), dc.YES if b1["passed"] else dc.NO)], dc.YES if ok else dc.NO)))
    r = c4(theory, alpha)
    if r:
        out["C4"] = ("over a sweep of sizes, head counts and attention sharpness: at each cell's Newton-refined "
                     "bipartite equilibrium (residual < 1e-9), the spectral radius of one law step's Jacobian on the "
                     "tangent space classifies it (unstable > 1 + 1e-6); over the non-degenerate cells (attention not "
                     "uniform there), unstable more often with several heads than with one at the same size and "
                     f"sharpness (one-sided Fisher over cells, < {alpha}); a positive control (a known unstable "
                     "equilibrium) is classified unstable", r)
    return out


def albert_size(meta: dict) -> str | None:
    """The paper's size of a shared-weight model (C5 (c)), as its family's adapter recognises it from the
    configuration (:meth:`powerlens.models.adapters.base.Adapter.paper_size`); None outside the paper's sizes."""
    from powerlens.models.adapters import ADAPTERS

    adapter = ADAPTERS.get(meta.get("arch"))
    return adapter.paper_size(meta, PAPER_MODELS) if adapter is not None else None
