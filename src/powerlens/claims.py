"""The claims audit: each claim C1-C10 of paper.md, judged by the pre-registered criteria of paper.md
section 4b (numbers from the config's ``claims:`` block, fixed before any run), with the measured value, the
null it was judged against, and a verdict.

Verdicts: "reproduced", "not reproduced", or "not tested in this run". A family's verdict uses trained models
only (every trained model of the family must pass); a family represented by random-weight twins only is
"not tested in this run" (its numbers are shown, labelled): random weights are never evidence.
Each criterion is a small function of one model's tables, so it can be tested on constructed cases.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

def family_of(arch: str, weights_labels: list[str] | None = None) -> str:
    """Display name of an architecture's family (its adapter's), with the precision of quantized trained
    weights when every trained model of the family has it: "Llama (trained, 4-bit)"."""
    from .adapters import ADAPTERS

    fam = getattr(ADAPTERS.get(arch), "family", arch)
    q = {lab.split(" (")[0] for lab in (weights_labels or []) if lab.startswith("trained, ")}
    return f"{fam} ({q.pop()})" if len(q) == 1 and all(lab.startswith("trained, ") for lab in weights_labels) else fam
FIG = {"C1": "fig_gamma, fig_rho", "C2": "fig_theory (a)", "C3": "fig_theory (b)", "C4": "fig_theory (c)",
       "C5": "fig_spectra, fig_albert_consensus, fig_albert_rotation", "C6": "fig_gamma", "C7": "fig_rho",
       "C8": "fig_gap", "C9": "fig_steering", "C10": "fig_rho"}
TEXT = {
    "C1": "Attention + normalisation tilt tokens towards v_{1,t} at each layer",
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


def _f(x: float) -> str:
    return f"{x:.3g}"


def _depth(g: pd.DataFrame) -> pd.DataFrame:
    """Rows of the model's own depth (long shared-weight runs test only those against the null)."""
    return g[g["rho_p_holm"].notna()] if "rho_p_holm" in g else g


def share_significant(g: pd.DataFrame, stat: str, alpha: float, above: float) -> tuple[int, int]:
    """Layers where ``stat`` > ``above`` and its Monte Carlo p, Holm-adjusted across layers, is < alpha, over
    the model's own depth. A saturated layer (half or more of the null's draws tie with the lead, paper.md
    section 4) never counts: there the statistic cannot separate any direction, and its randomised p is a
    coin (calibrated, but no evidence). Our choice: saturated layers stay in the denominator."""
    g = _depth(g)
    ok = (g[stat] > above) & (g[f"{stat}_p_holm"] < alpha)
    sat = f"{stat}_saturated"
    if sat in g:
        ok &= ~g[sat].fillna(False).astype(bool)
    return int(ok.sum()), len(g)


def n_saturated(g: pd.DataFrame, stat: str) -> int:
    """Layers of the model's own depth whose ``stat`` is saturated (ties with half or more of the draws)."""
    d = _depth(g)
    c = f"{stat}_saturated"
    return int(d[c].fillna(False).astype(bool).sum()) if c in d else 0


def _sat(g: pd.DataFrame, stat: str) -> str:
    k = n_saturated(g, stat)
    return f" ({k} saturated, not counted)" if k else ""


def c1(g: pd.DataFrame, crit: dict, alpha: float) -> tuple[bool, str, str]:
    """Tilt a(t+1) - a(t) against v_1 positive and Monte Carlo significant in at least a share of layers."""
    k, L = share_significant(g, "tilt", alpha, 0.0)
    d = _depth(g)
    return (k >= crit["C1_share_layers"] * L, f"{k} of {L} layers{_sat(g, 'tilt')}; median tilt "
            f"{_f(d['tilt'].median())}",
            f"random directions: median {_f(d['tilt_null_median'].median())}, q95 {_f(d['tilt_null_q95'].median())}")


def c5(final: pd.Series, leading_type: str, size: str | None, crit: dict) -> tuple[bool, str, str]:
    """Consensus, its alignment with M's consensus subspace beyond the null's 99th percentile, leading type."""
    cons = final["pairwise_abs_cos"] >= crit["C5_consensus_abs_cos"]
    span = final["span_M_final"] > final["span_M_final_null_q99"]
    expected = {"base": "real", "large": "real", "xlarge": "complex", "xxlarge": "complex"}.get(size or "")
    typ = None if expected is None else (leading_type.startswith(expected))
    ok = bool(cons and span and typ is True)  # (c) "not judged" is never a pass (paper.md section 4b)
    measured = (f"(a) final mean pairwise |cos| {_f(final['pairwise_abs_cos'])}: {'yes' if cons else 'no'}; "
                f"(b) alignment with span of M ({int(final['span_M_dim'])}-D) {_f(final['span_M_final'])}: "
                f"{'yes' if span else 'no'}; (c) leading type {leading_type}"
                + (f", expected {expected} for {size}: {'yes' if typ else 'no'}" if expected else
                   ": not judged (not one of the four paper sizes), so C5 is not reproduced for this model"))
    null = (f"random {int(final['span_M_dim'])}-D subspaces: q99 {_f(final['span_M_final_null_q99'])}, "
            f"median {_f(final['span_M_final_null_median'])}")
    return ok, measured, null


def c6(g: pd.DataFrame, crit: dict, alpha: float) -> tuple[bool, str, str]:
    """(a) gamma significantly above the null (Monte Carlo p, Holm across layers, < alpha; saturated layers
    not counted) in at least one layer, (b) below the weak bound in every layer, and (c) no accumulation (last
    output not aligned with the first layer's v_1 beyond the null). Revision 2's (a), "above the null's q95
    in one layer" uncorrected, passed by chance 79% of the time at 30 layers."""
    d = _depth(g)
    sig, L = share_significant(g, "gamma", alpha, -np.inf)
    weak = bool((d["gamma"] < crit["C6_weak_below"]).all())
    last = d.iloc[-1]
    acc_p = float(last["first_lead_gamma_p"])
    no_acc = acc_p >= alpha
    ok = sig >= 1 and weak and no_acc
    measured = (f"(a) gamma above the null, MC p (Holm) < {alpha}, in {sig} of {L} layers{_sat(g, 'gamma')} "
                f"(above the null's q95, uncorrected: {int((d['gamma'] > d['gamma_null_q95']).sum())}); "
                f"(b) max gamma {_f(d['gamma'].max())} (< {crit['C6_weak_below']}: {'yes' if weak else 'no'}); "
                f"(c) last output vs first v_1: {_f(last['first_lead_gamma'])} (p {_f(acc_p)})")
    null = (f"random directions: median gamma {_f(d['gamma_null_median'].median())}, q95 "
            f"{_f(d['gamma_null_q95'].median())}")
    return ok, measured, null


def c7(g: pd.DataFrame, crit: dict, alpha: float) -> tuple[bool, str, str]:
    """rho > 0.5 and Monte Carlo significant (Holm; saturated layers not counted) in at least a share of layers."""
    k, L = share_significant(g, "rho", alpha, 0.5)
    d = _depth(g)
    return (k >= crit["C7_share_layers"] * L, f"{k} of {L} layers{_sat(g, 'rho')}; median rho "
            f"{_f(d['rho'].median())}",
            f"random directions: median rho {_f(d['rho_null_median'].median())}, q95 "
            f"{_f(d['rho_null_q95'].median())}")


def c10(law: pd.DataFrame, model: pd.DataFrame, crit: dict, alpha: float) -> tuple[bool, str, str]:
    """The tilt of C1 is significant (Monte Carlo p, Holm) in at least a share of the attention-only law's
    layers, AND the real forward pass (FFN included) has no more significant layers than the law: removing
    the FFN does not remove the alignment (paper.md section 4b, revision 3)."""
    k_law, L = share_significant(law, "tilt", alpha, 0.0)
    k_model, L_model = share_significant(model, "tilt", alpha, 0.0)
    enough = k_law >= crit["C1_share_layers"] * L
    ok = enough and k_model <= k_law
    measured = (f"tilt significant in {k_law} of {L} layers without the FFN{_sat(law, 'tilt')}, "
                f"{k_model} of {L_model} with it{_sat(model, 'tilt')}"
                + ("" if ok else ": " + ("too few without the FFN" if not enough else
                                        "more with the FFN than without")))
    return ok, measured, "random directions (the Monte Carlo null of each mode)"


def c8(spec: pd.DataFrame, g: pd.DataFrame, alpha: float) -> tuple[bool, str, str]:
    """Spearman correlation across layers between 1 - |lambda_next|/|lambda_1| and gamma_t - null median,
    positive and significant (one-sided)."""
    from scipy.stats import spearmanr

    d = _depth(g).merge(spec[["layer", "ratio_next"]], on="layer")
    x, y = 1 - d["ratio_next"].to_numpy(), (d["gamma"] - d["gamma_null_median"]).to_numpy()
    if len(d) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return False, f"{len(d)} layers: correlation not defined", "-"
    r = spearmanr(x, y, alternative="greater")
    return (bool(r.statistic > 0 and r.pvalue < alpha),
            f"Spearman {_f(r.statistic)} (p {_f(r.pvalue)}, {len(d)} layers); median ratio beyond the pair "
            f"{_f(float(np.median(d['ratio_next'])))}", "no correlation (one-sided Spearman test)")


def c9(st: pd.DataFrame, crit: dict) -> tuple[bool, str, str]:
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
    null = (f"activation addition at matched norm of change: |cos| "
            f"{_f(float(base['cos_after_layer_model'].min()))}" + ("" if beats else " (above rank-1)"))
    return ok, measured, null


def c4(theory: list[dict], alpha: float) -> tuple[bool, str, str] | None:
    """Several heads break the multi-head bipartite equilibrium clearly more often than one head at some
    attention sharpness (one-sided Fisher tests, Holm across the sweep), with a positive control that breaks:
    :func:`powerlens.theory.c4_verdict`, the one place table_theory takes it from too."""
    from .theory import c4_verdict

    v = c4_verdict(theory, alpha)
    if v is None:
        return None
    return v["ok"], v["measured"], v["null"]


def albert_size(meta: dict) -> str | None:
    """base / large / xlarge / xxlarge from the hub id, the twin's model or the key (None if none says)."""
    for s in (meta.get("repo_id"), meta.get("twin_of"), meta.get("model")):
        m = re.search(r"(xxlarge|xlarge|large|base)", str(s or ""))
        if m:
            return m.group(1)
    return None


def evaluate(criteria: dict, meta: dict[str, dict], spectra: pd.DataFrame, dyn: pd.DataFrame,
             theory: list[dict], steer: pd.DataFrame, labels: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per claim (and per family where the claim is measured on models)."""
    labels = labels or {}
    alpha = criteria["alpha"]
    rows = []

    def add(claim, family, models, criterion, measured, null, ok, tested=True, why=""):
        verdict = ("reproduced" if ok else "not reproduced") if tested else "not tested in this run"
        rows.append({"claim": claim, "statement": TEXT[claim], "family": family, "models": models,
                     "criterion": criterion, "measured": measured, "null": null,
                     "verdict": verdict if tested else f"{verdict} ({why})", "figure": FIG[claim]})

    fams: dict[str, list[str]] = {}
    by_arch: dict[str, list[str]] = {}
    for m, x in meta.items():
        by_arch.setdefault(x["arch"], []).append(m)
    for arch, ms in by_arch.items():
        trained_labels = [meta[m]["weights_label"] for m in ms if not meta[m]["random_weights"]]
        fams.setdefault(family_of(arch, trained_labels), []).extend(ms)
    for family, ms in sorted(fams.items()):
        trained = [m for m in ms if not meta[m]["random_weights"]]
        use, tested = (trained, True) if trained else (ms, False)
        why = "random weights only: twins are never evidence"

        def names(xs):
            return ", ".join(f"{labels.get(m, m)} ({meta[m]['weights_label']})" for m in xs)

        def per_model(fn, xs, args):
            res = {m: fn(*args(m)) for m in xs}
            res = {m: r for m, r in res.items() if r is not None}
            if not res:
                return None
            ok = all(r[0] for r in res.values())
            meas = "; ".join(f"{labels.get(m, m)}: {r[1]}" for m, r in res.items())
            null = "; ".join(f"{labels.get(m, m)}: {r[2]}" for m, r in res.items())
            return ok, meas, null, list(res)

        def dyn_of(m, mode):
            return dyn[(dyn["model"] == m) & (dyn["mode"] == mode)].sort_values("layer")

        def have(m, mode):
            return len(dyn_of(m, mode)) > 0

        lv = [m for m in use if not meta[m]["shared_weights"]]
        sh = [m for m in use if meta[m]["shared_weights"]]
        r = per_model(lambda g: c1(g, criteria, alpha), [m for m in use if have(m, "attention-only")],
                      lambda m: (dyn_of(m, "attention-only"),))
        if r:
            add("C1", family, names(r[3]), f"attention-only law: tilt a(t+1) - a(t) against v_1 > 0 with Monte Carlo "
                f"p (Holm) < {alpha} in >= {criteria['C1_share_layers']:.0%} of layers", r[1], r[2], r[0], tested, why)
        if sh:
            def c5_args(m):
                g = dyn_of(m, "attention-only")
                lt = spectra[spectra["model"] == m]["leading_type"].iloc[0]
                return g.iloc[-1], lt, albert_size(meta[m]), criteria
            r = per_model(c5, [m for m in sh if have(m, "attention-only")], c5_args)
            if r:
                add("C5", family, names(r[3]), f"(a) final mean pairwise |cos| >= {criteria['C5_consensus_abs_cos']}; "
                    f"(b) alignment with M's span(v_1, v_2) or leading plane above the random-subspace null's "
                    f"q{criteria['C5_null_quantile'] * 100:.0f}; (c) leading type: base/large real, xlarge/xxlarge "
                    "complex", r[1], r[2], r[0], tested, why)
        lvm = [m for m in lv if have(m, "model")]
        if lvm:
            r = per_model(lambda g: c6(g, criteria, alpha), lvm, lambda m: (dyn_of(m, "model"),))
            add("C6", family, names(r[3]), f"model mode: (a) gamma above the null with Monte Carlo p (Holm) < "
                f"{alpha} in >= 1 layer, (b) gamma < {criteria['C6_weak_below']} in every layer, (c) last output vs "
                f"first layer's v_1 not beyond the null (p >= {alpha})", r[1], r[2], r[0], tested, why)
        # C7 is general: every model with the real forward pass, shared-weight ones over their own depth
        allm = [m for m in use if have(m, "model")]
        if allm:
            r = per_model(lambda g: c7(g, criteria, alpha), allm, lambda m: (dyn_of(m, "model"),))
            add("C7", family, names(r[3]), f"model mode: rho > 0.5 with Monte Carlo p (Holm) < {alpha} in >= "
                f"{criteria['C7_share_layers']:.0%} of layers (saturated layers not counted)", r[1], r[2], r[0],
                tested, why)
        if lvm:
            r = per_model(lambda s, g: c8(s, g, alpha), lvm,
                          lambda m: (spectra[spectra["model"] == m], dyn_of(m, "model")))
            add("C8", family, names(r[3]), f"model mode: Spearman(1 - |lambda_next|/|lambda_1|, gamma - null median) "
                f"across layers > 0 with p < {alpha} (lambda_next: first eigenvalue beyond the lead's pair)",
                r[1], r[2], r[0], tested, why)
        both = [m for m in use if have(m, "attention-only") and have(m, "model")]
        if both:
            r = per_model(lambda a, b: c10(a, b, criteria, alpha), both,
                          lambda m: (dyn_of(m, "attention-only"), dyn_of(m, "model")))
            add("C10", family, names(r[3]), f"tilt a(t+1) - a(t) > 0 with Monte Carlo p (Holm) < {alpha} in >= "
                f"{criteria['C1_share_layers']:.0%} of the attention-only law's layers (FFN removed), and no more "
                "such layers in the real forward pass (FFN included) than in the law", r[1], r[2], r[0], tested,
                why)
        stm = [m for m in use if len(steer[steer["model"] == m])]
        if stm:
            r = per_model(lambda s: c9(s, criteria), stm, lambda m: (steer[(steer["model"] == m)
                                                                          & (steer["kappa"] >= 0)],))
            add("C9", family, names(r[3]), f"largest kappa: min over targets of mean |cos(x, u)| >= "
                f"{criteria['C9_alignment']}, u principal, and not below activation addition at matched norm of "
                "change", r[1], r[2], r[0], tested, why)
    # theory claims (synthetic layers, no family)
    th = {(r["case"], r["attention"], r["quantity"]): r for r in theory}
    a = th.get(("a: real dominant", "full", "rate per step"))
    if a:
        add("C2", "synthetic", "synthetic layers", a["criterion"],
            f"rate {_f(a['measured'])} vs |mu2/mu1| {_f(a['predicted'])}", "analytic prediction", a["passed"])
    b1 = th.get(("b: complex pair", "full", "angle per step (rad)"))
    b0 = th.get(("b: complex pair", "full", "plane distance"))
    if b1 and b0:
        add("C3", "synthetic", "synthetic layers", f"{b0['criterion']}; {b1['criterion']}",
            f"distance {b0['measured']:.2g}; angle {_f(b1['measured'])} vs {_f(b1['predicted'])}",
            "analytic prediction", b0["passed"] and b1["passed"])
    r = c4(theory, alpha)
    if r:
        add("C4", "synthetic", "synthetic layers (softmax attention)", "over a sweep of sizes, head counts and "
            "attention sharpness: from the multi-head bipartite equilibrium (a fixed point to 1e-10 whose epsilon = 0 "
            "control stays), perturbed runs stop being antipodal more often with several heads than with one at "
            f"some sharpness (Fisher, Holm across the sweep, < {alpha}); a positive control (a known unstable "
            "equilibrium) breaks", r[1], r[2], r[0])
    order = {f"C{i}": i for i in range(1, 11)}
    df = pd.DataFrame(rows)
    if len(df):
        df = df.sort_values(["claim", "family"], key=lambda s: s.map(order) if s.name == "claim" else s,
                            kind="stable").reset_index(drop=True)
    for c in TEXT:
        if c not in set(df.get("claim", [])):
            df = pd.concat([df, pd.DataFrame([{"claim": c, "statement": TEXT[c], "family": "-", "models": "-",
                                               "criterion": "-", "measured": "no model in this run exercises it",
                                               "null": "-", "verdict": "not tested in this run",
                                               "figure": FIG[c]}])])
    return df.reset_index(drop=True)
