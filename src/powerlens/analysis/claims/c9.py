"""Claim C9 (paper.md sections 4d and 4e, revision 6): a large enough rank-1 change of the last layer aligns every
token with a chosen u, judged in the real forward pass at the largest kappa each target's sweep reached, with the
law beside it and activation addition at the edit's KL beside the verdict (never part of it)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from powerlens.analysis import decisions as dc
from powerlens.analysis.claims import flip as fl
from powerlens.analysis.claims.criteria import LAW, NOT_REPRODUCED, REPRODUCED, Beside, Verdict, _f
from powerlens.analysis.kappa_sweep import FLAT, STOPS, at_kl


def aa_at_kl(sweep: pd.DataFrame, kl: float) -> float:
    """The most alignment activation addition reaches within a KL budget: the largest mean |cos| over its beta
    sweep at KL <= ``kl`` (on unrelated prompts), the curve interpolated linearly at ``kl`` itself. Never
    extrapolated: NaN where the sweep does not reach down to ``kl`` (its first point lies above it; crediting
    that point would credit alignment reached at a larger KL, paper.md section 4e) or has no point."""
    got = at_kl([(float(k), float(c), np.zeros(0)) for k, c in zip(sweep["kl_unrelated"],
                                                                  sweep["cos_after_layer_model"])], float(kl))
    return float("nan") if got is None else float(got[0])


#: C9's "still rising" (paper.md section 4e): the real pass's mean |cos| gains at least this much per doubling of
#: kappa over the sweep's last step: the doubling's own flat rule (less than 0.01 over two doublings), per doubling
RISING_PER_DOUBLING = FLAT / 2


def c9(st: pd.DataFrame, crit: dict) -> Verdict:
    """C9, judged in the real forward pass with the law beside it (paper.md sections 4d and 4e, revision 6): at
    the largest kappa, min over targets of mean |cos(x, u)| >= the bound and u principal. Where a norm after the
    edit caps the change below the bound at any kappa (Gemma 3), "underpowered" with the ceiling in numbers.
    Each target is read at the largest kappa its sweep reached (the steering step doubles kappa past the
    configured ones: :class:`~powerlens.analysis.kappa_sweep.KappaRule`); where a sweep stopped at its cap
    while the alignment still rose (:data:`RISING_PER_DOUBLING`), "inconclusive" (a step budget, no evidence).
    Activation addition is beyond the paper: reported beside the verdict, never part of it, at matched KL on
    unrelated prompts where the model has an LM head (:func:`aa_at_kl`), else at matched norm of change."""
    r1 = st[st["method"].str.startswith("rank-1") & (st["kappa"] >= 0)]
    aa = st[st["method"].str.contains("matched norm") & (st["kappa"] >= 0)]
    sweep = st[st["method"] == "activation addition (beta sweep)"] if "method" in st else st.iloc[:0]
    top, base = _reached(r1), _reached(aa)  # each target at the largest kappa its sweep reached (revision 6)
    kmax = _kappas_text(top)
    cos = float(top["cos_after_layer_model"].min())
    law = float(top["cos_after_layer_attention_only"].min()) if "cos_after_layer_attention_only" in top else np.nan
    principal = bool(top["u_principal"].astype(bool).all())
    by_kl = len(sweep) > 0 and "kl_unrelated" in top and top["kl_unrelated"].notna().all()
    if by_kl:
        rival = pd.Series({t: aa_at_kl(sweep[sweep["target"] == t], float(top.loc[t, "kl_unrelated"]))
                           for t in top.index})
        how = "at matched KL on unrelated prompts"
        rival_text = ", ".join(f"{t}: {_f(rival[t])} at KL {_f(float(top.loc[t, 'kl_unrelated']))}"
                               + (" (its sweep does not reach down to this KL)" if np.isnan(rival[t]) else "")
                               for t in top.index)
    else:
        rival = base["cos_after_layer_model"].reindex(top.index)
        how = "at matched norm of change"
        rival_text = ", ".join(f"{t}: {_f(float(rival[t]))}" for t in top.index)
    smallest = r1[r1["u_principal"].astype(bool) & (r1["kappa"] > 0)].groupby("target")["kappa"].min()
    bound = crit["C9_alignment"]
    ok = cos >= bound and principal
    measured = (f"real forward pass, {kmax}: min |cos| {_f(cos)}; the law beside it (attention-only, same "
                f"kappa): min |cos| {_f(law)}; u principal {'yes' if principal else 'no'}; smallest kappa with u "
                f"principal: " + (", ".join(f"{t} {_f(k)}" for t, k in smallest.items()) or "none"))
    ceiling = float(top["cos_ceiling"].max()) if "cos_ceiling" in top and top["cos_ceiling"].notna().any() else None
    measured += _cap_text(top, ceiling)
    measured += (f"; beside the verdict, not part of it (beyond the paper): rank-1 minus activation addition {how}: "
                 + _matched_text(top, rival))
    null = f"activation addition {how} (reported, not judged): |cos| {rival_text}"
    failed = [p for p, bad in ((f"min |cos| {_f(cos)} < {bound}", cos < bound), ("u not principal", not principal))
              if bad]
    state = lambda bad: dc.NO if bad else dc.YES  # noqa: E731
    flip = fl.threshold(cos, bound, "min |cos|") + _ceiling_note(r1, cos, ceiling, crit)
    flip = fl.join([(flip, state(cos < bound)),
                    ("u would have to " + ("stop being" if principal else "become") + " principal",
                     state(not principal))], dc.YES if ok else dc.NO)
    beside = (None if np.isnan(law) else  # the law at the same kappa: beside the verdict, never part of it
              Beside(LAW, REPRODUCED if law >= bound and principal else NOT_REPRODUCED))
    v = Verdict(ok, measured, null, "; ".join(failed), flip=flip, failed_parts=tuple(failed), beside=beside)
    if not ok and ceiling is not None and ceiling < bound:
        why = (f"a norm after the edit caps the change: the largest mean |cos| any kappa allows is {_f(ceiling)} "
               f"< {bound}")
        return v.cannot_pass(why)
    rise = _still_rising(r1, bound)
    if not ok and rise:
        why = (f"the sweep stopped ({kmax}) while the real pass's mean |cos| still rose ({rise}): a step budget "
               "(C9_kappa_cap or the configured kappas), no evidence")
        return v._replace(inconclusive=True, failed=why, failed_parts=(why,))
    return v


def _matched_text(top: pd.DataFrame, rival: pd.Series) -> str:
    """Per target, the edit minus activation addition: with the steering step's bootstrap over prompts
    (:mod:`powerlens.analysis.steering.matched`) the differences in alignment and in P(target) at the edit's KL with
    their 95% intervals; else the difference in alignment alone."""
    def signed(x: float) -> str:
        return ("+" if x > 0 else "") + _f(x)

    out = []
    for t, r in top.iterrows():
        if "diff_cos_at_kl" in top and not np.isnan(float(r["diff_cos_at_kl"])):
            parts = [f"{name} {signed(float(r[c]))} (95% over prompts {_f(float(r[c + '_lo']))} to "
                     f"{_f(float(r[c + '_hi']))})" for name, c in (("alignment", "diff_cos_at_kl"),
                                                                   ("P(target)", "diff_p_at_kl"))
                     if not np.isnan(float(r[c]))]
            out.append(f"{t}: " + ", ".join(parts))
        else:
            out.append(f"{t} {_f(float(r['cos_after_layer_model'] - rival[t]))}")
    return "; ".join(out) if any(": " in x for x in out) else ", ".join(out)


def _reached(rows: pd.DataFrame) -> pd.DataFrame:
    """Each target's row at the largest kappa its sweep reached (revision 6 doubles kappa target by target),
    indexed by target."""
    return rows.loc[rows.groupby("target", sort=False)["kappa"].idxmax()].set_index("target")


def _kappas_text(top: pd.DataFrame) -> str:
    """"kappa 256", or "kappa reached: a 4096, b 1024" where the targets' sweeps stopped at different kappas,
    with why each stopped where the steering step recorded it."""
    ks = top["kappa"].astype(float)
    stops = top["sweep_stop"].astype(str) if "sweep_stop" in top else pd.Series(dtype=str)
    words = lambda w: STOPS.get(w, w).format(flat=FLAT)  # noqa: E731
    why = ("" if not len(stops) else f" (every target: {words(stops.iloc[0])})" if stops.nunique() == 1 else
           " (" + "; ".join(f"{t}: {words(w)}" for t, w in stops.items()) + ")")
    if ks.nunique() == 1:
        return f"kappa {_f(float(ks.iloc[0]))}{why}"
    return "kappa reached: " + ", ".join(f"{t} {_f(float(k))}" for t, k in ks.items()) + why


def _cap_text(top: pd.DataFrame, ceiling: float | None) -> str:
    """Where a post-attention norm follows W_O: the cap on the change, how saturated the edit is along p * u and
    the largest |cos| the cap allows."""
    if "post_norm_cap" not in top or not top["post_norm_cap"].notna().any():
        return ""
    out = (f"; a post-attention norm follows W_O: the change the residual stream receives is capped "
           f"(cap {_f(float(top['post_norm_cap'].iloc[0]))}) and points along p * u (min |cos| with p * u "
           f"{_f(float(top['cos_pu_after_layer_model'].min()))})")
    if "saturation_share" in top and top["saturation_share"].notna().any():
        out += "; the edit's output along p * u against its saturation value sqrt(d) ||p * u||: " + ", ".join(
            f"{t} {_f(float(r['saturation_share']) * 100)}% of {_f(float(r['post_norm_saturation_u']))}"
            for t, r in top.iterrows())
    if ceiling is not None:
        out += (f"; the largest mean |cos| any change of that size along p * u allows (the FFN's answer aside): "
                f"{', '.join(f'{t} {_f(float(r.cos_ceiling))}' for t, r in top.iterrows())}")
    return out


def _last_steps(r1: pd.DataFrame) -> dict[str, tuple[float, float, float, float]]:
    """Each target's last step over positive kappas: (kappa before, kappa after, the real pass's mean |cos| at
    each); a target with fewer than two positive kappas has none."""
    out = {}
    for t, g in r1[r1["kappa"] > 0].sort_values("kappa", kind="stable").groupby("target", sort=False):
        if len(g) >= 2:
            (k1, a), (k2, b) = g[["kappa", "cos_after_layer_model"]].iloc[-2:].astype(float).itertuples(index=False)
            out[t] = (k1, k2, a, b)
    return out


def _rising(k1: float, k2: float, a: float, b: float) -> bool:
    """The alignment gained at least :data:`RISING_PER_DOUBLING` per doubling of kappa from k1 to k2."""
    return b - a >= RISING_PER_DOUBLING * float(np.log2(k2 / k1))


def _still_rising(r1: pd.DataFrame, bound: float) -> str:
    """"x: 0.0683 -> 0.432 from kappa 32 to 256" for each target below ``bound`` whose sweep's last step still
    rose (:func:`_rising`); "" where every such curve flattened."""
    done = set(r1[r1["sweep_stop"].isin(("flat", "ceiling", "criterion"))]["target"]) if "sweep_stop" in r1 else set()
    steps = {t: st for t, st in _last_steps(r1).items() if st[3] < bound and _rising(*st) and t not in done}
    return "; ".join(f"{t}: {_f(a)} -> {_f(b)} from kappa {_f(k1)} to {_f(k2)}" for t, (k1, k2, a, b) in steps.items())


def _ceiling_note(r1: pd.DataFrame, cos: float, ceiling: float | None, crit: dict) -> str:
    """Why the alignment cannot reach the bound, where it cannot: a cap below it, or a curve already flat over
    the sweep's largest kappas (more kappa does not raise it)."""
    bound = crit["C9_alignment"]
    if cos >= bound:
        return ""
    if ceiling is not None and ceiling < bound:
        return f" (it cannot: the cap allows at most {_f(ceiling)} at any kappa)"
    below = {t: st for t, st in _last_steps(r1).items() if st[3] < bound}
    if below and not any(_rising(*st) for st in below.values()):  # flat by the verdict's rule
        t, (k1, k2, a, b) = min(below.items(), key=lambda x: x[1][3])
        return (f" (from kappa {_f(k1)} to {_f(k2)} the real pass moved only from {_f(a)} to {_f(b)}"
                f"{f' ({t})' if len(below) > 1 else ''}: the curve flattens below the bound, so a larger kappa "
                "would not raise it)")
    return ""
