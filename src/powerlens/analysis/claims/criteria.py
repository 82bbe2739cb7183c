"""Each claim's criterion as a small function of one model's tables, returning a :class:`Verdict`; the
synthetic-layer claims (C2-C4) from the theory records."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
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
    rounding of its threshold (paper.md section 4c); ``ok`` is then False and ``failed`` says why."""

    ok: bool
    measured: str
    null: str
    failed: str = ""
    inconclusive: bool = False
    flip: str = ""  # what would have to change for the verdict to flip (:mod:`powerlens.analysis.claims.flip`)

    @property
    def word(self) -> str:
        """The verdict word of paper.md section 4b (revision 4)."""
        return INCONCLUSIVE if self.inconclusive else REPRODUCED if self.ok else NOT_REPRODUCED


REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_JUDGED = "reproduced", "not reproduced", "inconclusive", "not judged"


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

TWIN_SENTENCE = "random weights of this architecture pass as well: the law tilts for any F"
BOTH_NULLS = "random directions and F's other eigen-directions (|lambda| > 1e-9 |lambda_1|), each with Holm"


def _f(x: float) -> str:
    return fmt_num(x)


def _depth(g: pd.DataFrame) -> pd.DataFrame:
    """Rows of the model's own depth (long shared-weight runs test only those against the nulls)."""
    for c in ("tilt_sig", "rho_sig", "rho_p_holm"):
        if c in g:
            return g[g[c].notna()]
    return g


class Count(NamedTuple):
    """Layers of the model's own depth whose test ``<col>_sig`` says yes, and undecided, out of ``of``."""

    yes: int
    undecided: int
    of: int
    saturated: int
    max_R: int
    mc_undecided: int = 0  # of the undecided: the Monte Carlo test at its cap (else the eigen-direction null)

    def at_least(self, need: float) -> str:
        return dc.YES if self.yes >= need else dc.NO if self.yes + self.undecided < need else dc.UNDECIDED

    def below(self, limit: float) -> str:
        return dc.YES if self.yes + self.undecided < limit else dc.NO if self.yes >= limit else dc.UNDECIDED

    def text(self) -> str:
        eig = self.undecided - self.mc_undecided
        extra = [f"{self.mc_undecided} undecided at R = {self.max_R}" if self.mc_undecided else "",
                 f"{eig} undecided by the eigen-direction null (too few members to decide)" if eig else "",
                 f"{self.saturated} saturated, not counted" if self.saturated else ""]
        extra = [e for e in extra if e]
        return f"{self.yes} of {self.of}" + (f" ({'; '.join(extra)})" if extra else "")

    def flip_at_least(self, need: float, what: str) -> str:
        return fl.at_least(self.yes, self.undecided, self.of, need, what)

    def flip_below(self, limit: float, what: str) -> str:
        return fl.below(self.yes, self.undecided, self.of, limit, what)


def count(g: pd.DataFrame, col: str, *, alpha: float, above: float = -np.inf) -> Count:
    """Decided significance of test ``col`` (``tilt``, ``attn_tilt_neg``...) over the model's own depth. A table
    without ``<col>_sig`` (the bias-free control's columns) counts ``<col>_p_holm`` < alpha with ``col`` above
    ``above``, saturated layers excluded."""
    d = _depth(g)
    if f"{col}_sig" in d:
        s = d[f"{col}_sig"].fillna(dc.NO).astype(str)
    elif f"{col}_p_holm" in d:
        ok = (d[f"{col}_p_holm"] < alpha) & (d[col] > above)
        if f"{col}_saturated" in d:
            ok &= ~d[f"{col}_saturated"].fillna(False).astype(bool)
        s = ok.map({True: dc.YES, False: dc.NO})
    else:
        s = pd.Series([dc.NO] * len(d), dtype=object)
    sat = _saturated(d, col)
    R = int(d[f"{col}_R"].max()) if f"{col}_R" in d and len(d) and d[f"{col}_R"].notna().any() else 0
    mc = int(((s == dc.UNDECIDED) & (d[f"{col}_mc_sig"] == dc.UNDECIDED)).sum()) if f"{col}_mc_sig" in d else 0
    return Count(int((s == dc.YES).sum()), int((s == dc.UNDECIDED).sum()), len(d), sat, R, mc)


def share_significant(g: pd.DataFrame, stat: str, *, alpha: float, above: float = 0.0) -> tuple[int, int]:
    """(layers decided significant against both nulls, layers of the model's depth): the counts the figures
    annotate. ``alpha`` and ``above`` are part of each test's decision in the dynamics table already."""
    c = count(g, stat, alpha=alpha, above=above)
    return c.yes, c.of


def _saturated(d: pd.DataFrame, col: str) -> int:
    return int(d[f"{col}_saturated"].fillna(False).astype(bool).sum()) if f"{col}_saturated" in d else 0


def n_saturated(g: pd.DataFrame, stat: str) -> int:
    """Layers of the model's own depth whose ``stat`` is saturated (ties with half or more of the draws)."""
    return _saturated(_depth(g), stat)


def _undecided(c: Count, what: str) -> str:
    return f"{what}: {c.undecided} undecided layers decide it ({c.text()})"


def _nulls_apart(d: pd.DataFrame, crit: dict) -> str:
    """Each null's own count (informative, not a decision): random directions alone by the point Holm p, F's
    other eigen-directions alone by their decided test."""
    if "tilt_p_holm" not in d or "tilt_eig_sig" not in d:
        return ""
    mc = int(((d["tilt_p_holm"] < crit["alpha"]) & (d["tilt"] > 0)).sum())
    eig = int((d["tilt_eig_sig"] == dc.YES).sum())
    return f" (random directions alone, point Holm p: {mc}; F's other eigen-directions alone: {eig})"


def c1(law: pd.DataFrame, model: pd.DataFrame | None, twin: pd.DataFrame | None, crit: dict) -> Verdict:
    """C1 in the attention-only law (the claim drops the FFN): the tilt a(t+1) - a(t) towards v_1 beats both
    nulls in at least a share of the layers. The row shows beside it the same test in the real forward pass
    and on the family's random-weight twin, with section 4b's sentence when random weights pass too."""
    share = crit["C1_share_layers"]
    c = count(law, "tilt", alpha=crit["alpha"])
    need = share * c.of
    state = c.at_least(need)
    d = _depth(law)
    measured = f"law: {c.text()} layers beat both nulls{_nulls_apart(d, crit)}; median tilt {_f(d['tilt'].median())}"
    if model is not None and len(model):
        cm = count(model, "tilt", alpha=crit["alpha"])
        measured += f"; real forward pass (FFN included), same test: {cm.text()} layers"
    if twin is not None and len(twin):
        ct = count(twin, "tilt", alpha=crit["alpha"])
        measured += f"; random-weight twin (law): {ct.text()} layers"
        if ct.at_least(share * ct.of) == dc.YES:
            measured += f": {TWIN_SENTENCE}"
    null = (f"{BOTH_NULLS}; random directions: median tilt {_f(d['tilt_null_median'].median())}, q95 "
            f"{_f(d['tilt_null_q95'].median())}")
    return verdict(state, measured, null, f"law: tilt significant in {c.yes} of {c.of} layers (needs {share:.0%})",
                   _undecided(c, "law"), c.flip_at_least(need, "law"))


def c5(final: pd.Series, leading_type: str, size: str | None, crit: dict) -> Verdict:
    """Consensus, its alignment with M's consensus subspace beyond the null's 99th percentile, leading type.
    A quantity within 1e-6 (relative) of its threshold is undecided (section 4c)."""
    cons = dc.compare(float(final["pairwise_abs_cos"]), crit["C5_consensus_abs_cos"], strict=False)
    span = dc.compare(float(final["span_M_final"]), float(final["span_M_final_null_q99"]))
    expected = {"base": "real", "large": "real", "xlarge": "complex", "xxlarge": "complex"}.get(size or "")
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


def c6(g: pd.DataFrame, crit: dict) -> Verdict:
    """(a) gamma significantly above the random-direction null (decided Monte Carlo test, Holm across layers)
    in at least one layer, (b) below the weak bound in every layer, and (c) no accumulation (the last output
    is not aligned with the first layer's v_1 beyond the null). Revision 2's (a), "above the null's q95 in one
    layer" uncorrected, passed by chance 79% of the time at 30 layers."""
    d = _depth(g)
    c = count(g, "gamma", alpha=crit["alpha"])
    a = c.at_least(1)
    weak = dc.both(*[dc.compare(float(x), crit["C6_weak_below"], above=False) for x in d["gamma"]])
    last = d.iloc[-1]
    acc = str(last.get("first_lead_gamma_sig", dc.NO) or dc.NO)
    no_acc = {dc.YES: dc.NO, dc.NO: dc.YES}.get(acc, dc.UNDECIDED)
    measured = (f"(a) gamma above the null, decided Monte Carlo test (Holm), in {c.text()} layers "
                f"(above the null's q95, uncorrected: {int((d['gamma'] > d['gamma_null_q95']).sum())}); "
                f"(b) max gamma {_f(d['gamma'].max())} (< {crit['C6_weak_below']}: {weak}); "
                f"(c) last output vs first v_1: {_f(last['first_lead_gamma'])} (p "
                f"{_f(last.get('first_lead_gamma_p', float('nan')))}, beyond the null: {acc})")
    null = (f"random directions: median gamma {_f(d['gamma_null_median'].median())}, q95 "
            f"{_f(d['gamma_null_q95'].median())}")
    parts = ((f"(a) gamma significant in {c.yes} of {c.of} layers", a),
             (f"(b) max gamma {_f(d['gamma'].max())}", weak), ("(c) accumulation", no_acc))
    flip = fl.join([(c.flip_at_least(1, "(a) gamma"), a),
                    (fl.threshold(float(d["gamma"].max()), crit["C6_weak_below"], "(b) max gamma", above=False), weak),
                    ("(c) the last output's alignment with the first v_1 would have to "
                     + ("become significant" if no_acc == dc.YES else "lose its significance"), no_acc)],
                   dc.both(a, weak, no_acc))
    return verdict(dc.both(a, weak, no_acc), measured, null, "; ".join(p for p, x in parts if x == dc.NO),
                   "; ".join(f"{p}: undecided" for p, x in parts if x == dc.UNDECIDED), flip)


def c7(g: pd.DataFrame, crit: dict) -> Verdict:
    """rho > 0.5 and beating both nulls (decided tests, Holm; saturated layers not counted) in at least a share
    of the layers, over the model's own depth."""
    share = crit["C7_share_layers"]
    c = count(g, "rho", alpha=crit["alpha"])
    d = _depth(g)
    return verdict(c.at_least(share * c.of), f"{c.text()} layers; median rho {_f(d['rho'].median())}",
                   f"{BOTH_NULLS}; random directions: median rho {_f(d['rho_null_median'].median())}, q95 "
                   f"{_f(d['rho_null_q95'].median())}",
                   f"rho significant in {c.yes} of {c.of} layers (needs {share:.0%})", _undecided(c, "rho"),
                   c.flip_at_least(share * c.of, "rho"))


def c10(model: pd.DataFrame, law: pd.DataFrame | None, crit: dict) -> Verdict:
    """C10 in the real forward pass, split at the sublayers (paper.md section 4b, revision 4): the tilt across
    the attention sublayer beats both nulls in at least a share of the layers, AND the tilt across the FFN
    sublayer is significantly negative (the FFN undoes the alignment) in fewer than a quarter of them. The law's
    count is C1's, shown for reference."""
    share, quarter = crit["C1_share_layers"], crit["C10_ffn_negative_below"]
    if "attn_tilt_sig" not in model:
        return Verdict(False, "no sublayer tilts in this run's model-mode table", "-", "no sublayer tilts")
    ap, an, fp, fn = (count(model, c, alpha=crit["alpha"])
                      for c in ("attn_tilt", "attn_tilt_neg", "ffn_tilt", "ffn_tilt_neg"))
    attn, ffn = ap.at_least(share * ap.of), fn.below(quarter * fn.of)
    measured = (f"real forward pass: attention sublayer tilt significantly positive in {ap.text()} layers, "
                f"negative in {an.text()}; FFN sublayer positive in {fp.text()}, negative in {fn.text()}")
    if law is not None and len(law):
        measured += f"; the law (C1's count): {count(law, 'tilt', alpha=crit['alpha']).text()} layers"
    failed = "; ".join(p for p, x in ((f"attention tilt significant in {ap.yes} of {ap.of} layers (needs "
                                       f"{share:.0%})", attn), (f"FFN undoes the tilt in {fn.yes} of {fn.of} layers "
                                                               f"(must be under {quarter:.0%})", ffn)) if x == dc.NO)
    undecided = "; ".join(p for p, x in ((_undecided(ap, "attention"), attn), (_undecided(fn, "FFN"), ffn))
                          if x == dc.UNDECIDED)
    flip = fl.join([(ap.flip_at_least(share * ap.of, "attention tilt"), attn),
                    (fn.flip_below(quarter * fn.of, "FFN undoing the tilt"), ffn)], dc.both(attn, ffn))
    return verdict(dc.both(attn, ffn), measured, BOTH_NULLS, failed, undecided, flip)


def c8(spec: pd.DataFrame, g: pd.DataFrame, alpha: float) -> Verdict:
    """Spearman correlation across layers between 1 - |lambda_next|/|lambda_1| and gamma_t - null median,
    positive and significant (one-sided)."""
    from scipy.stats import spearmanr

    d = _depth(g).merge(spec[["layer", "ratio_next"]], on="layer")
    x, y = 1 - d["ratio_next"].to_numpy(), (d["gamma"] - d["gamma_null_median"]).to_numpy()
    if len(d) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return Verdict(False, f"{len(d)} layers: correlation not defined", "-", "correlation not defined")
    r = spearmanr(x, y, alternative="greater")
    ok = bool(r.statistic > 0 and r.pvalue < alpha)
    flip = fl.threshold(float(r.pvalue), alpha, "p", above=False)
    return Verdict(ok, f"Spearman {_f(r.statistic)} (p {_f(r.pvalue)}, {len(d)} layers); median ratio beyond "
                   f"the pair {_f(float(np.median(d['ratio_next'])))}", "no correlation (one-sided Spearman test)",
                   "" if ok else f"Spearman {_f(r.statistic)}, p {_f(r.pvalue)}", flip=flip)


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
    th = {(r["case"], r["attention"], r["quantity"]): r for r in theory}
    a = th.get(("a: real dominant", "full", "rate per step"))
    if a:
        out["C2"] = (a["criterion"], Verdict(bool(a["passed"]), f"rate {_f(a['measured'])} vs |mu2/mu1| "
                                             f"{_f(a['predicted'])}", "analytic prediction",
                                             "" if a["passed"] else f"relative error {_f(a['rel_error'])}",
                                             flip=fl.threshold(a["rel_error"], C2_REL_TOL, "relative error", False)))
    b1 = th.get(("b: complex pair", "full", "angle per step (rad)"))
    b0 = th.get(("b: complex pair", "full", "plane distance"))
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
    """base / large / xlarge / xxlarge when the model's configuration (hidden size, heads, layers) is one of
    the four albert-*-v2 configurations, else None. Never from a name: "base" also matches "database"."""
    if meta.get("arch") != "albert":
        return None
    dims = (meta.get("d_model"), meta.get("n_heads"), meta.get("n_layers"))
    for name, a in PAPER_MODELS.items():
        c = a.kwargs
        if a.arch == "albert" and dims == (c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]):
            return name.split("-")[1]
    return None
