"""Tables as CSV, Markdown and LaTeX (booktabs), rounded consistently, written atomically."""

from __future__ import annotations

import json

from pathlib import Path

import numpy as np
import pandas as pd

from .io import atomic_path, write_text

DIGITS = 4  # significant digits for every float in every table


def _fmt(x):
    if isinstance(x, float):
        return f"{x:.{DIGITS}g}"
    return x


def write_table(df: pd.DataFrame, stem: str | Path, caption: str = "") -> list[Path]:
    """Write ``stem.csv``, ``stem.md``, ``stem.tex`` and ``stem.html`` (what the report shows: the table
    rendered, every cell escaped as text); returns the paths."""
    stem = Path(stem)
    shown = df.copy()
    for c in shown.columns:
        shown[c] = shown[c].map(_fmt)
    write_text(stem.with_suffix(".html"), _html(shown, caption))
    paths = [stem.with_suffix(s) for s in (".csv", ".md", ".tex")]
    with atomic_path(paths[0]) as tmp:
        shown.to_csv(tmp, index=False, lineterminator="\n")
    write_text(paths[1], (f"{caption}\n\n" if caption else "") + shown.to_markdown(index=False) + "\n")
    tex = shown.to_latex(index=False, escape=True, caption=caption or None, label=f"tab:{stem.name}")
    write_text(paths[2], tex.rstrip() + "\n")
    return paths


def _html(shown: pd.DataFrame, caption: str) -> str:
    """A standalone HTML page holding the table (cells and caption escaped; no script, no external file)."""
    import html

    body = shown.to_html(index=False, escape=True, border=0, classes="powerlens-table", na_rep="")
    style = ("body{font-family:sans-serif;font-size:13px;margin:8px}"
             "table.powerlens-table{border-collapse:collapse}"
             ".powerlens-table th,.powerlens-table td{padding:3px 8px;border-bottom:1px solid #ddd;"
             "text-align:left;vertical-align:top}.powerlens-table th{background:#f3f3f3;position:sticky;top:0}"
             ".powerlens-table tr:hover td{background:#fafafa}")
    cap = f"<p>{html.escape(caption)}</p>\n" if caption else ""
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><style>{style}</style></head>\n<body>\n"
            f"{cap}{body}\n</body></html>\n")


def models_table(weights_meta: list[dict]) -> pd.DataFrame:
    """``table_models``: id, revision, parameters, d, layers, heads, shared weights, source, weights."""
    rows = []
    for m in weights_meta:
        rows.append({
            "model": m["model"],
            "hub id / origin": m.get("repo_id") or (f"twin of {m['twin_of']}" if m.get("twin_of") else m["source"]),
            "revision": (m.get("resolved_revision") or "-")[:12],
            "params (M)": round(m["n_params"] / 1e6, 3),
            "d_model": m["d_model"], "layers": m["n_layers"], "heads": m["n_heads"],
            "shared weights": "yes" if m["shared_weights"] else "no",
            "source": m["source"], "weights": m["weights_label"],
        })
    return pd.DataFrame(rows)


def spectra_table(per_model: list[pd.DataFrame], labels: dict[str, str] | None = None) -> pd.DataFrame:
    """``table_spectra``: one row per model, over its unique layers (shared weights counted once)."""
    rows = []
    labels = labels or {}
    for df in per_model:
        u = df.drop_duplicates("unique_layer")
        counts = u["leading_type"].value_counts()
        lead = ", ".join(f"{t}: {counts[t]}" for t in ("real positive", "real negative", "complex pair")
                         if t in counts)
        m = df["model"].iloc[0]
        rows.append({
            "model": labels.get(m, m), "weights": df["weights"].iloc[0], "unique layers": len(u),
            "leading eigenvalue (layers)": lead,
            "median |l1|": float(u["abs_lambda1"].median()),
            "median gap": float(u["gap"].median()),
            "gap range": f"[{u['gap'].min():.3g}, {u['gap'].max():.3g}]",
            "median gap beyond pair": float(u["gap_beyond_pair"].median()),
            "median |l2|/|l1|": float(u["ratio"].median()),
            "median |l_next|/|l1| (beyond the pair)": float(u["ratio_next"].median()),
            "ratio beyond pair range": f"[{u['ratio_next'].min():.3g}, {u['ratio_next'].max():.3g}]",
            "I+F leading differs (layers)": int((~u["residual_same_as_F"].astype(bool)).sum()),
            "max rel. residual": float(u["rel_residual"].max()),
            "F~ = F diag(g): leading (layers)": (
                ", ".join(f"{t}: {c}" for t, c in u["folded_leading_type"].value_counts().items())
                if "folded_leading_type" in u and u["folded_leading_type"].notna().any() else "- (post-norm)"),
            "F~: median |l_next|/|l1|": (float(u["folded_ratio_next"].median()) if "folded_ratio_next" in u
                                         else float("nan")),
        })
    return pd.DataFrame(rows)


def alignment_table(df: pd.DataFrame, labels: dict[str, str] | None = None, alpha: float = 0.05) -> pd.DataFrame:
    """``table_alignment``: per model and mode, over the model's own depth: gamma, rho and the tilt against the
    Monte Carlo null of random subspaces (null median and 95th percentile; layers significant after Holm),
    the same against M = I + F's and F~'s leads, secondary token/prompt-level tests, the non-leading
    eigenvector null, and the attention-only diagnostics."""
    labels = labels or {}
    rows = []

    from .claims import n_saturated, share_significant

    def sig(g, stat, above):
        # the claims' own count (saturated layers never count), so table and verdict cannot disagree
        return share_significant(g, stat, alpha, above)[0] if f"{stat}_p_holm" in g else float("nan")

    for (m, mode), g in df.groupby(["model", "mode"], sort=False):
        g = g[g["rho_p_holm"].notna()]  # the model's own depth
        row = {
            "model": labels.get(m, m), "weights": g["weights"].iloc[0], "mode": mode, "layers": len(g),
            "tokens": int(g["n_tokens"].median()), "prompts": int(g["n_prompts"].median()),
            "mean gamma": float(g["gamma"].mean()),
            "gamma null median": float(g["gamma_null_median"].median()),
            "gamma null q95": float(g["gamma_null_q95"].median()),
            "layers gamma > null q95": int((g["gamma"] > g["gamma_null_q95"]).sum()),
            f"layers gamma, MC p_Holm < {alpha}": sig(g, "gamma", -np.inf),
            "median rho": float(g["rho"].median()),
            "rho null median": float(g["rho_null_median"].median()),
            f"layers rho > 0.5, MC p_Holm < {alpha}": sig(g, "rho", 0.5),
            f"layers tilt > 0, MC p_Holm < {alpha}": sig(g, "tilt", 0.0),
            "saturated layers (rho, tilt)": f"{n_saturated(g, 'rho')}, {n_saturated(g, 'tilt')}",
            f"secondary: token sign p < {alpha}": int((g["rho_p_token_sign"] < alpha).sum()),
            f"secondary: prompt sign p < {alpha}": int((g["rho_p_prompt_sign"] < alpha).sum()),
            "mean gamma, non-leading eigvec null": float(g["gamma_null_eig"].mean()),
            "mean gamma, M = I+F lead": float(g["gamma_M"].mean()),
            "M lead: layers rho sig.": sig(g, "rho_M", 0.5),
        }
        if "gamma_Ft" in g and g["gamma_Ft"].notna().any():
            row["mean gamma, F~ lead"] = float(g["gamma_Ft"].mean())
            row["F~ lead: layers rho sig."] = sig(g, "rho_Ft", 0.5)
        if "attn_entropy_rel" in g and g["attn_entropy_rel"].notna().any():
            row["attention entropy / log n"] = float(g["attn_entropy_rel"].mean())
            row["median ||b_eff|| / ||F x_mean||"] = float(g["bias_ratio"].median())
        if "rho_nobias" in g and g["rho_nobias"].notna().any():
            row["bias-free: mean gamma"] = float(g["gamma_nobias"].mean())
            row["bias-free: layers rho sig."] = sig(g.rename(columns={"rho_nobias": "r", "rho_p_holm_nobias": "r_p_holm"}),
                                                    "r", 0.5)
        rows.append(row)
    return pd.DataFrame(rows)


def theory_table(results: list[dict], alpha: float = 0.05) -> pd.DataFrame:
    """``table_theory``: case, attention, quantity, predicted, measured, relative error, criterion, verdict;
    the C4 sweep's cells, its positive control, and C4's verdict from :func:`powerlens.theory.c4_verdict` (the
    function table_claims takes it from)."""
    from .theory import c4_verdict

    rows = []
    for r in results:
        det = r["detail"]
        extra = ""
        if det.get("sweep"):
            extra = (f"{det['broke']}/{det['runs']} runs broke; equilibrium residual {det['fixed_point_residual']:.2g} "
                     f"after {det['equilibrium_steps']} steps; |score| at equilibrium {det['score_at_equilibrium']:.3g}; "
                     f"epsilon = 0 control stays: {det['control_stays']}")
        elif "runs" in det:
            extra = f"{det['broke']}/{det['runs']} runs broke; epsilon = 0 control stays: {det['control_stays']}"
        elif "isotropic_starts_minority_fraction" in det:
            extra = (f"isotropic starts: minority on -v1 = {det['isotropic_starts_minority_fraction']:.3g}")
        verdict = "pass" if r["passed"] else "fail"
        if det.get("sweep"):
            verdict = "in the tests" if r["passed"] else "left out (no fixed point, or the control left)"
        if r["attention"] == "softmax" and not r["case"].startswith("c"):
            verdict = "reported (prediction is for full attention)"
        rows.append({"case": r["case"], "attention": r["attention"], "quantity": r["quantity"],
                     "predicted": r["predicted"], "measured": r["measured"], "relative error": r["rel_error"],
                     "criterion": r["criterion"], "verdict": verdict, "notes": extra})
    v = c4_verdict(results, alpha)
    if v is not None:
        rows.append({"case": "c: C4 verdict", "attention": "softmax", "quantity": "several heads break more often "
                     "than one head", "predicted": float("nan"), "measured": float("nan"),
                     "relative error": float("nan"), "criterion": f"some Fisher test (Holm across the sweep) < {alpha}, "
                     "and the positive control breaks", "verdict": "reproduced" if v["ok"] else "not reproduced",
                     "notes": v["measured"]})
    return pd.DataFrame(rows)


def steering_table(df: pd.DataFrame, labels: dict[str, str] | None = None) -> pd.DataFrame:
    """``table_steering``: per model, target and method, at the largest kappa and at kappa = 0; the baseline
    (activation addition at the edit's site) has the same norm of change as the rank-1 edit at each kappa."""
    labels = labels or {}
    rows = []
    for (m, tgt), g in df[df["kappa"] >= 0].groupby(["model", "target"], sort=False):
        kmax = g["kappa"].max()
        for meth, gm in g.groupby("method", sort=False):
            top = gm[gm["kappa"] == kmax].iloc[0]
            zero = gm[gm["kappa"] == 0].iloc[0]
            principal = g[g["u_principal"] & g["method"].str.startswith("rank-1")]["kappa"]
            rows.append({
                "model": labels.get(m, m), "weights": top["weights"], "target": tgt, "method": meth,
                "kappa max": kmax,
                "lstsq residual ||V^T z - u||": top.get("lstsq_residual", float("nan")),
                "stated bound": (top["bound_note"] if isinstance(top.get("bound_note"), str) and top["bound_note"]
                                 else top["kappa_bound"]),
                "smallest kappa with u principal": principal.min() if len(principal) else float("nan"),
                "norm of change (k max)": top.get("change_norm_model", float("nan")),
                "post-norm cap": top.get("post_norm_cap", float("nan")),
                "|cos| with p*u (k max)": top.get("cos_pu_after_layer_model", float("nan")),
                "edit constant |alpha z.b_V|": top.get("edit_constant_norm", float("nan")),
                "|cos| after layer (k=0)": zero["cos_after_layer_model"],
                "|cos| after layer (k max), model": top["cos_after_layer_model"],
                "|cos| (k max), attention-only": top["cos_after_layer_attention_only"],
                "P(target) k=0": zero["p_target"], "P(target) k max": top["p_target"],
                "KL k max": top["kl_from_unsteered"], "LM head": top["lm_head"],
            })
    return pd.DataFrame(rows)


def continuations_table(per_model: list[pd.DataFrame], labels: dict[str, str] | None = None) -> pd.DataFrame:
    """Greedy continuations per model, target, kappa and prompt, both methods (text as generated)."""
    labels = labels or {}
    cols = ["model", "weights", "target", "kappa", "prompt", "rank-1 (last layer O')",
            "activation addition (matched norm)"]
    frames = [d for d in per_model if len(d)]
    if not frames:
        return pd.DataFrame([{c: "-" for c in cols} | {"model": "no causal LM with a token target in this run"}],
                            columns=cols)
    df = pd.concat(frames, ignore_index=True)
    df["model"] = df["model"].map(lambda m: labels.get(m, m))
    for c in ("prompt", "rank-1 (last layer O')", "activation addition (matched norm)"):
        # generated text is data: newlines and control characters shown as escapes, table pipes escaped
        df[c] = df[c].astype(str).map(lambda t: json.dumps(t, ensure_ascii=False)[1:-1].replace("|", "\\|"))
    return df[cols].reset_index(drop=True)


def quantization_table(per_model: list[pd.DataFrame], labels: dict[str, str] | None = None) -> pd.DataFrame:
    """Per model and quantization type: summaries over layers of the per-layer comparison."""
    labels = labels or {}
    rows = []
    for df in per_model:
        for (m, q), g in df.groupby(["model", "quantization"], sort=False):
            changed = g.loc[g["leading_type_changed"].astype(bool), "layer"].tolist()
            rows.append({"model": labels.get(m, m), "quantization": q, "layers": len(g),
                         "median |dlambda_1|/|lambda_1|": g["rel_change_lambda1"].median(),
                         "max |dlambda_1|/|lambda_1|": g["rel_change_lambda1"].max(),
                         "leading type changed (layers)": ", ".join(map(str, changed)) or "none",
                         "min |cos(v_1, v_1q)|": g["abs_cos_v1"].min(),
                         "max |delta gamma|": g["delta_gamma"].abs().max(),
                         "max |delta rho|": g["delta_rho"].abs().max()})
    if not rows:
        return pd.DataFrame([{"model": "no model listed in `quantization.models` in this run"}])
    return pd.DataFrame(rows)
