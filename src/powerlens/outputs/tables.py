"""Tables as CSV, Markdown and LaTeX (booktabs), rounded consistently, written atomically."""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pandas as pd

from powerlens.analysis import verdict_tests as vt
from powerlens.analysis.claims import count, n_saturated, share_significant
from powerlens.analysis.claims.layer_criteria import tilt_summary
from powerlens.core.fmt import (  # noqa: F401  (the one number format, re-exported)  # noqa: F401  (re-exported)
    DASH,
    csv_text,
    csv_untext,
    fmt_num,
    is_random_label,
    md_escape,
    md_paragraph,
    tex_escape,
    weights_text,
)
from powerlens.core.io import atomic_path, write_text
from powerlens.models.sources import revision_text, source_text
from powerlens.outputs.theory_table import THEORY_MISSING, theory_table  # noqa: F401 (re-exported)

MISSING_DEFAULT = "the quantity is not defined for this row"


def _cell(x):
    if isinstance(x, str):
        return x
    if x is None or isinstance(x, (float, int, np.integer, np.floating, bool, np.bool_)):
        return fmt_num(x)
    return str(x)


def write_table(df: pd.DataFrame, stem: str | Path, caption: str = "", missing: dict[str, str] | None = None,
                cell_class=None) -> list[Path]:
    """Write ``stem.csv``, ``stem.md``, ``stem.tex`` and ``stem.html`` (what the report shows: the table
    rendered, every cell escaped as text); returns the paths.

    Every number goes through :func:`fmt_num`. A value that does not exist (NaN, None) is a dash, and the
    caption gets a footnote per column holding dashes: ``missing[column]`` says why (a table that leaves a
    column out of ``missing`` gets the generic reason). ``cell_class(column, text)`` may name a CSS class for a
    cell of the HTML form (the claims' coloured verdicts)."""
    stem = Path(stem)
    missing = missing or {}
    shown = df.copy()
    if "weights" in shown.columns:  # models with trained weights first, random-weight twins after them
        shown = shown.iloc[
            np.argsort(shown["weights"].map(is_random_label).to_numpy(), kind="stable")].reset_index(drop=True)
    why: dict[str, list[str]] = {}
    for c in shown.columns:
        gone = shown[c].map(lambda x: x is None or (isinstance(x, float) and np.isnan(x)))
        shown[c] = shown[c].map(_cell)
        if gone.any():
            why.setdefault(missing.get(c, MISSING_DEFAULT), []).append(f"\"{c}\"")
    notes = [f"A dash in {', '.join(cols)} means: {reason}." for reason, cols in why.items()]
    full_caption = " ".join([caption.strip()] + notes).strip()
    write_text(stem.with_suffix(".html"), _html(shown, caption.strip(), notes, cell_class))
    paths = [stem.with_suffix(s) for s in (".csv", ".md", ".tex")]
    with atomic_path(paths[0]) as tmp:
        _csv_form(shown).to_csv(tmp, index=False, lineterminator="\n")
    write_text(paths[1], _markdown(shown, caption.strip(), notes))
    tex_df = shown.rename(columns=tex_escape)
    for c in tex_df.columns:
        tex_df[c] = tex_df[c].map(tex_escape)
    tex = tex_df.to_latex(index=False, escape=False, caption=tex_escape(full_caption) or None,
                          label=f"tab:{stem.name}")
    write_text(paths[2], tex.rstrip() + "\n")
    return paths


def _csv_form(shown: pd.DataFrame) -> pd.DataFrame:
    """The table as its CSV holds it: every header and text cell through :func:`csv_text`, so a label such as
    ``=HYPERLINK(...)`` is text in a spreadsheet, never a formula (numbers and dashes unchanged)."""
    out = shown.rename(columns=csv_text)
    for c in out.columns:
        out[c] = out[c].map(csv_text)
    return out


def _markdown(shown: pd.DataFrame, caption: str, notes: list[str]) -> str:
    esc = shown.rename(columns=md_escape)
    for c in esc.columns:
        esc[c] = esc[c].map(md_escape)
    head = (md_paragraph(caption) + "\n\n") if caption else ""
    foot = ("\n" + "\n".join(f"- {md_paragraph(n)}" for n in notes) + "\n") if notes else ""
    return head + esc.to_markdown(index=False, disable_numparse=True) + "\n" + foot


def _html(shown: pd.DataFrame, caption: str, notes: list[str] | None = None, cell_class=None) -> str:
    """A standalone HTML page holding the table (cells and caption escaped; no script, no external file)."""
    def td(c, v):
        k = cell_class(c, v) if cell_class else None
        return f"<td class=\"{k}\">" if k else "<td>"

    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    rows = ["<tr>" + "".join(f"{td(c, v)}{html.escape(str(v))}</td>" for c, v in zip(shown.columns, r)) + "</tr>"
            for r in shown.itertuples(index=False)]
    body = (f'<div class="wrap"><table class="powerlens-table"><thead><tr>{head}</tr></thead>\n<tbody>\n'
            + "\n".join(rows) + "\n</tbody></table></div>")
    style = ("body{font-family:sans-serif;font-size:13px;margin:8px}"
             "table.powerlens-table{border-collapse:collapse}"
             ".powerlens-table th,.powerlens-table td{padding:3px 8px;border-bottom:1px solid #ddd;"
             "text-align:left;vertical-align:top}.powerlens-table th{background:#f3f3f3;position:sticky;top:0}"
             ".powerlens-table tr:hover td{background:#fafafa}"
             "td.ok{background:#d8f0d8}td.fail{background:#f8dcdc}td.na{background:#eeeeee;color:#555}td.inc{background:#fbe8c0}"
             "td.weak{background:#dfe6f3}td.ctl{font-style:italic;color:#444}"
             ".notes{color:#444;font-size:12px}"
             ".wrap{overflow-x:auto;max-width:100%}.powerlens-table td{max-width:30em;overflow-wrap:anywhere}")
    cap = f"<p>{html.escape(caption)}</p>\n" if caption else ""
    foot = ("<div class=\"notes\">" + "".join(f"<p>{html.escape(n)}</p>" for n in notes) + "</div>\n"
            if notes else "")
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><style>{style}</style></head>\n<body>\n"
            f"{cap}{body}\n{foot}</body></html>\n")


def models_table(weights_meta: list[dict], labels: dict[str, str] | None = None,
                 manifests: dict[str, dict] | None = None) -> pd.DataFrame:
    """``table_models``: each model's name (its config label), config key, where its weights come from (hub id,
    package or twin), revision, parameters, d, layers, heads, shared weights, source and weights label."""
    labels, manifests = labels or {}, manifests or {}
    rows = []
    for m in weights_meta:
        man = manifests.get(m["model"], {})
        origin = (m.get("repo_id") or (f"twin of {m['twin_of']}" if m.get("twin_of") else None)
                  or (f"matched control of {m['control_of']}" if m.get("control_of") else None)  # not its folder's path
                  or man.get("package") or man.get("path") or m["source"])
        rows.append({
            "model": labels.get(m["model"], m["model"]), "key": m["model"], "hub id / origin": origin,
            "revision": revision_text(m["source"], m.get("resolved_revision")),
            "params (M)": m["n_params"] / 1e6,
            "d_model": m["d_model"], "layers": m["n_layers"], "heads": m["n_heads"],
            "shared weights": "yes" if m["shared_weights"] else "no",
            "source": source_text(m["source"]), "weights": weights_text(m["weights_label"]),
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
        real = u[u["leading_type"] != "complex pair"]
        rows.append({
            "model": labels.get(m, m), "weights": weights_text(df["weights"].iloc[0]), "unique layers": len(u),
            "leading eigenvalue (layers)": lead,
            "median |l1|": float(u["abs_lambda1"].median()),
            # |l1| - |l2| is 0 by conjugacy where a complex pair leads: over real-led layers only
            "median gap |l1|-|l2| (real-led layers)": (float(real["gap"].median()) if len(real) else None),
            "gap range (real-led layers)": (f"[{fmt_num(real['gap'].min())}, {fmt_num(real['gap'].max())}]"
                                            if len(real) else None),
            "median gap beyond pair": float(u["gap_beyond_pair"].median()),
            "median |l2|/|l1|": float(u["ratio"].median()),
            "median |l_next|/|l1| (beyond the pair)": float(u["ratio_next"].median()),
            "ratio beyond pair range": f"[{fmt_num(u['ratio_next'].min())}, {fmt_num(u['ratio_next'].max())}]",
            "I+F leading differs (layers)": int((~u["residual_same_as_F"].astype(bool)).sum()),
            "max rel. residual": float(u["rel_residual"].max()),
            "F~ = F diag(g): leading (layers)": (
                ", ".join(f"{t}: {c}" for t, c in u["folded_leading_type"].value_counts().items())
                if "folded_leading_type" in u and u["folded_leading_type"].notna().any() else "none (post-norm)"),
            "F~: median |l_next|/|l1|": (float(u["folded_ratio_next"].median()) if "folded_ratio_next" in u
                                         else float("nan")),
        })
    return pd.DataFrame(rows)


def alignment_table(df: pd.DataFrame, labels: dict[str, str] | None = None, *, crit: dict) -> pd.DataFrame:
    """``table_alignment``: per model and mode, over the model's own depth: gamma, rho and the tilt against the
    Monte Carlo null of random subspaces (null median and 95th percentile; layers significant after Holm),
    the same against M = I + F's and F~'s leads, secondary token/prompt-level tests, the non-leading
    eigenvector null, and the attention-only diagnostics; ``crit``: the decision rule (its alpha, C1's share)."""
    labels = labels or {}
    alpha = crit["alpha"]
    rows = []

    F, G, ctrl_rho = vt.Field, vt.GAMMA, vt.control_spec(vt.RHO)

    def sig(g, spec, above):
        # the claims' own count (saturated layers never count), so table and verdict cannot disagree
        return (share_significant(g, spec, alpha=alpha, above=above)[0]
                if spec.col(F.SIG) in g or spec.col(F.P_HOLM) in g else float("nan"))

    for (m, mode), g in df.groupby(["model", "mode"], sort=False):
        g = vt.own_depth(g)
        row = {
            "model": labels.get(m, m), "weights": weights_text(g["weights"].iloc[0]), "mode": mode, "layers": len(g),
            "tokens": int(g[vt.Sums.N_TOKENS].median()), "prompts": int(g[vt.Sums.N_PROMPTS].median()),
            "mean gamma": float(g[G.value].mean()),
            "gamma null median": float(g[G.col(F.NULL_MEDIAN)].median()),
            "gamma null q95": float(g[G.col(F.NULL_Q95)].median()),
            "layers gamma > null q95": int((g[G.value] > g[G.col(F.NULL_Q95)]).sum()),
            f"layers gamma, MC p_Holm < {alpha}": sig(g, vt.GAMMA, -np.inf),
            "median rho": float(g[vt.RHO.value].median()),
            "rho null median": float(g[vt.RHO.col(F.NULL_MEDIAN)].median()),
            f"layers rho > 0.5, random directions, Holm < {alpha}": sig(g, vt.RHO, 0.5),
            f"layers tilt > 0, random directions, Holm < {alpha}": sig(g, vt.TILT, 0.0),
            **tilt_summary(g, crit),
            "layers undecided (gamma, rho, tilt)": ", ".join(str(count(g, s, alpha=alpha).undecided)
                                                             for s in (vt.GAMMA, vt.RHO, vt.TILT)),
            "largest R (draws)": int(max(g.get(s.col(F.R), pd.Series([0])).max() for s in (vt.GAMMA, vt.RHO, vt.TILT))),
            "saturated layers (rho, tilt)": f"{n_saturated(g, vt.RHO)}, {n_saturated(g, vt.TILT)}",
            f"secondary: token sign p < {alpha}": int((g[vt.Sums.RHO_TOKEN_SIGN] < alpha).sum()),
            f"secondary: prompt sign p < {alpha}": int((g[vt.Sums.RHO_PROMPT_SIGN] < alpha).sum()),
            "mean gamma, non-leading eigvec null": float(g[vt.Sums.of(vt.GAMMA.stat, "null_eig")].mean()),
            "mean gamma, M = I+F lead": float(g[vt.GAMMA_M.value].mean()),
            "M lead: layers rho sig.": sig(g, vt.RHO_M, 0.5),
        }
        if vt.GAMMA_FT.value in g and g[vt.GAMMA_FT.value].notna().any():
            row["mean gamma, F~ lead"] = float(g[vt.GAMMA_FT.value].mean())
            row["F~ lead: layers rho sig."] = sig(g, vt.RHO_FT, 0.5)
        if vt.ATTN_TILT.col(F.SIG) in g and g[vt.ATTN_TILT.col(F.SIG)].notna().any():
            row["sublayer tilt layers: attention +, -; FFN +, -"] = ", ".join(
                str(count(g, c, alpha=alpha).yes) for c in (vt.ATTN_TILT, vt.ATTN_TILT_NEG, vt.FFN_TILT,
                                                            vt.FFN_TILT_NEG))
        if vt.Sums.ATTN_ENTROPY in g and g[vt.Sums.ATTN_ENTROPY].notna().any():
            row["attention entropy / log n"] = float(g[vt.Sums.ATTN_ENTROPY].mean())
            row["median ||b_eff|| / ||F x_mean||"] = float(g[vt.Sums.BIAS_RATIO].median())
        if ctrl_rho.value in g and g[ctrl_rho.value].notna().any():
            row["bias-free: mean gamma"] = float(g[vt.control_spec(vt.GAMMA).value].mean())
            row["bias-free: layers rho sig."] = sig(g, ctrl_rho, 0.5)
        rows.append(row)
    return pd.DataFrame(rows)


def _stop_text(key) -> str:
    """Why a target's kappa sweep stopped (revision 6's doubling), in words; "-" for a run without the record."""
    from powerlens.analysis.kappa_sweep import FLAT, STOPS

    return STOPS[key].format(flat=FLAT) if isinstance(key, str) and key in STOPS else "-"


def steering_table(df: pd.DataFrame, labels: dict[str, str] | None = None) -> pd.DataFrame:
    """``table_steering``: per model, target and method, at the largest kappa the target's sweep reached (revision
    6 doubles kappa past the configured ones, column "why the kappa sweep stopped") and at kappa = 0; the baseline
    (activation addition at the edit's site) has the same norm of change as the rank-1 edit at each kappa."""
    labels = labels or {}
    rows = []
    for (m, tgt), g in df[df["kappa"] >= 0].groupby(["model", "target"], sort=False):
        kmax = g["kappa"].max()
        for meth, gm in g.groupby("method", sort=False):
            top = gm[gm["kappa"] == kmax].iloc[0]
            zero = gm[gm["kappa"] == 0].iloc[0]
            principal = g[g["u_principal"].astype(bool) & g["method"].str.startswith("rank-1")]["kappa"]
            rows.append({
                "model": labels.get(m, m), "weights": weights_text(top["weights"]), "target": tgt, "method": meth,
                "kappa max": kmax,  # the largest kappa this target's sweep reached
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
                "KL k max": top["kl_from_unsteered"],
                "KL on unrelated prompts (k max)": top.get("kl_unrelated", float("nan")),
                "saturation share along p*u (k max)": top.get("saturation_share", float("nan")),
                "largest |cos| the cap allows": top.get("cos_ceiling", float("nan")), "LM head": top["lm_head"],
                "why the kappa sweep stopped": _stop_text(top.get("sweep_stop")),
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
    if (~df["weights"].map(is_random_label)).any():  # trained models only: a twin's text is noise (twins table)
        df = df[~df["weights"].map(is_random_label)]
    df["model"] = df["model"].map(lambda m: labels.get(m, m))
    df["weights"] = df["weights"].map(weights_text)
    for c in ("prompt", "rank-1 (last layer O')", "activation addition (matched norm)"):
        # generated text is data: newlines and control characters shown as escapes (write_table escapes the
        # Markdown form's pipes); nothing generated but whitespace is said in words, never a blank cell; the
        # steering CSV's spreadsheet guard undone (write_table guards the table's own CSV again)
        df[c] = df[c].astype(str).map(csv_untext).map(
            lambda t: json.dumps(t, ensure_ascii=False)[1:-1] if t.strip() else
            f"{CONTINUATION_BLANK} ({json.dumps(t)})")
    return df[cols].reset_index(drop=True)


#: What a continuation cell says when the model generated only whitespace or an end-of-text token.
CONTINUATION_BLANK = "(only whitespace or end of text)"
CONTINUATIONS_NOTE = (f"{CONTINUATION_BLANK}: the greedy continuation holds no visible character (its exact "
                      "text in JSON quotes). \ufffd stands for bytes that are not a whole UTF-8 character (a "
                      "byte-level token cut inside one). Random-weight twins' continuations are left out when the "
                      "run has a trained causal LM.")


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


SPECTRA_MISSING = {"F~: median |l_next|/|l1|": "post-norm model: no norm gain precedes the attention, so there is "
                   "no F~",
                   "median gap |l1|-|l2| (real-led layers)": "a complex pair leads every layer (|l1| - |l2| is 0 by "
                   "conjugacy; see the gap beyond the pair)",
                   "gap range (real-led layers)": "a complex pair leads every layer (|l1| - |l2| is 0 by conjugacy; "
                   "see the gap beyond the pair)"}
ALIGNMENT_MISSING = {
    "attention entropy / log n": "measured in the attention-only law only",
    "median ||b_eff|| / ||F x_mean||": "measured in the attention-only law only",
    "bias-free: mean gamma": "the bias-free control runs in the attention-only law only",
    "bias-free: layers rho sig.": "the bias-free control runs in the attention-only law only",
    "mean gamma, F~ lead": "post-norm model: no norm gain precedes the attention, so there is no F~",
    "F~ lead: layers rho sig.": "post-norm model: no norm gain precedes the attention, so there is no F~",
}
STEERING_MISSING = {
    "lstsq residual ||V^T z - u||": "activation addition solves no least-squares problem",
    "stated bound": "activation addition has no stated bound",
    "smallest kappa with u principal": "u never became the leading eigenvector",
    "post-norm cap": "no norm follows W_O in this architecture (only Gemma 3 has a post-attention norm)",
    "|cos| with p*u (k max)": "no norm follows W_O in this architecture (only Gemma 3 has a post-attention norm)",
    "edit constant |alpha z.b_V|": "activation addition edits no weight, so it has no edit constant",
    "P(target) k=0": "the target is not a token (a random direction, or an encoder without an LM head)",
    "P(target) k max": "the target is not a token (a random direction, or an encoder without an LM head)",
    "KL k max": "no LM head (vector alignment only)",
    "KL on unrelated prompts (k max)": "no LM head (vector alignment only), or no corpus prompt beyond the steering "
                                       "ones",
    "saturation share along p*u (k max)": "no norm follows W_O in this architecture (only Gemma 3 has one), or "
                                          "the row is activation addition's",
    "largest |cos| the cap allows": "no norm follows W_O in this architecture (only Gemma 3 has one): no cap",
}
QUANTIZATION_MISSING: dict[str, str] = {}


# table_speed's total rows (written by powerlens.pipeline.speed, read by the article)
#: The total row's labels in table_speed (the article reads the run's total time from it).
TOTAL_MODEL, TOTAL_STEP = "all heavy jobs", "total"
#: Its weights cell: starts with "random" so that write_table's trained-first order keeps it last.
TOTAL_WEIGHTS = "random and trained: every job above"
#: The run's total row: every timed job (the heavy ones above and the other benchmark files the step reads).
RUN_MODEL, RUN_STEP = "all timed jobs", "run total"
#: What the run's total adds to the heavy jobs (the speed rule's input ``bench_other``).
OTHER_JOBS = "fetch, extraction and its check, theory"
