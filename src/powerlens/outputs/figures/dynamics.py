"""fig_gamma, fig_rho (per depth, against the Monte Carlo null), ALBERT's consensus and rotation, and
the driver that draws them from the dynamics step's files."""

from __future__ import annotations

from pathlib import Path

import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from powerlens.core.io import read_json
from powerlens.outputs.figures.style import _name
from powerlens.outputs.plotting import (
    TRAINED,
    TWIN_SUFFIX,
    draw_split,
    grid,
    legend_below,
    panel_title,
    placeholder,
    save,
    style,
    unique_handles,
)
from powerlens.outputs.tables import ALIGNMENT_MISSING, alignment_table, write_table


def _depth_note(ax, g_all, g_shown):
    """Say so when a long shared-weight run is shown over the model's own depth only."""
    if len(g_all) > len(g_shown):
        ax.text(0.98, 0.02, f"attention-only: steps 0-{int(g_shown['layer'].max())} of {len(g_all)} "
                "(the model's depth;\nthe long run is in fig_albert_consensus)", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=6.5, color="0.35")


def _marks(ax, g, stat: str, above: float, alpha: float, color: str, mode: str) -> None:
    """Filled: the per-layer Holm mark (the dynamics table's decided ``<stat>_sig``: the random-direction null
    after Holm across layers, the claimed side of its bound, not saturated); open: not significant; cross:
    saturated (half or more of the null's draws tie); ring: undecided at the draws this layer got (a layer is
    extended only where a claim's verdict can move, paper.md section 4d)."""
    sat = (g[f"{stat}_saturated"].fillna(False).astype(bool) if f"{stat}_saturated" in g
           else pd.Series(False, index=g.index))
    if f"{stat}_sig" in g:
        decided = g[f"{stat}_sig"].fillna("no").astype(str)
        sig, und = decided == "yes", decided == "undecided"
    else:
        sig, und = (g[f"{stat}_p_holm"] < alpha) & (g[stat] > above) & ~sat, pd.Series(False, index=g.index)
    sat = sat & ~und
    ax.scatter(g["layer"][sig], g[stat][sig], color=color, s=16, zorder=3,
               label=f"{mode}: per-layer Holm < {alpha} (random directions)")
    if und.any():
        ax.scatter(g["layer"][und], g[stat][und], facecolors="none", edgecolors=color, s=40, linewidths=1.5,
                   zorder=3, label=f"{mode}: per-layer Holm undecided at its draws")
    sig = sig | und
    ax.scatter(g["layer"][~sig & ~sat], g[stat][~sig & ~sat], facecolors="white", edgecolors=color, s=16, zorder=3,
               label=f"{mode}: not significant")
    if sat.any():
        ax.scatter(g["layer"][sat], g[stat][sat], color=color, marker="x", s=20, zorder=3,
                   label=f"{mode}: saturated (half or more of the draws tie)")


def fig_gamma(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int, *, alpha: float):
    """gamma_t vs layer for every layer-varying model, both modes, against the Monte Carlo null (its median and
    95th percentile as thin lines), with the significance marks of fig_rho."""
    style()
    models = [m for m in df["model"].unique() if not df[df["model"] == m]["shared"].iloc[0]]
    if not models:
        models = list(df["model"].unique())
    fig, axes = grid(len(models), ncols=3, size=3.3)
    for ax, m in zip(axes, models):
        for i, (mode, g) in enumerate(df[df["model"] == m].groupby("mode", sort=True)):
            ls = "-" if mode == "model" else "--"
            g = g[g["gamma_null_q95"].notna()]  # the model's own depth
            c = f"C{i}"
            ax.plot(g["layer"], g["gamma"], ls=ls, lw=1.1, color=c, label=f"{mode}: leading $v_1$")
            _marks(ax, g, "gamma", -np.inf, alpha, c, mode)
            ax.plot(g["layer"], g["gamma_null_q95"], color=c, lw=0.8, ls=(0, (1, 1.5)),
                    label=f"{mode}: null's 95th percentile")
            ax.plot(g["layer"], g["gamma_null_median"], color=c, lw=0.6, alpha=0.6, ls=(0, (4, 2)),
                    label=f"{mode}: null's median")
        ax.set_title(_name(labels, weights, m))
        ax.set_xlabel("layer t")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_ylabel(r"$\gamma_t$: mean alignment with $v_{1,t}$")
        ax.set_ylim(bottom=0)
    fig.suptitle("Alignment of each layer's output with its own leading eigenvector, against random subspaces of "
                 "the lead's dimension\n(alignment: |cos| with v_1, or the projection norm on the plane of a "
                 "complex leading pair)", y=1.02, fontsize=9)
    fig.tight_layout()
    legend_below(fig, *unique_handles(axes), ncol=3)
    return save(fig, stem, dpi)


def fig_rho(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int, *, alpha: float):
    """rho_t vs layer (fraction of tokens whose alignment increases), 0.5 line, the Monte Carlo null's median
    and 95th percentile as thin lines, significance marks as the claims count them; each panel says at how
    many layers the null's 95th percentile reaches 1 (there rho = 1 cannot be significant)."""
    style()
    models = list(df["model"].unique())
    fig, axes = grid(len(models), ncols=3, size=3.5)
    for ax, m in zip(axes, models):
        notes = []
        for i, (mode, g_all) in enumerate(df[df["model"] == m].groupby("mode", sort=True)):
            g = g_all[g_all["rho_p_holm"].notna()]  # the model's own depth (long shared-weight runs: its first L)
            c = f"C{i}"
            ax.plot(g["layer"], g["rho"], color=c, lw=1.1, ls="-" if mode == "model" else "--",
                    label=f"{mode}: rho")
            _marks(ax, g, "rho", 0.5, alpha, c, mode)
            ax.plot(g["layer"], g["rho_null_q95"], color=c, lw=0.8, ls=(0, (1, 1.5)),
                    label=f"{mode}: null's 95th percentile")
            if mode == "attention-only":
                _depth_note(ax, g_all, g)
            full = int((g["rho_null_q95"] >= 0.999).sum())
            if full:
                notes.append((c, f"{mode}: null q95 = 1 at {full} of {len(g)} layers"))
        long_run = len(df[(df["model"] == m) & (df["mode"] == "attention-only")]) > len(g)
        for k, (c, text) in enumerate(notes):  # above _depth_note's two lines where a long run has one
            ax.text(0.02, (0.14 if long_run else 0.03) + 0.08 * k, text, transform=ax.transAxes, fontsize=6.5, color=c,
                    bbox={"facecolor": "white", "alpha": 0.8, "lw": 0, "pad": 1})
        ax.axhline(0.5, color="0.3", lw=0.8, ls=":")
        ax.set_ylim(-0.08 - 0.08 * (len(notes) + long_run), 1.02)  # a band below 0 for the notes: no point hidden
        ax.set_yticks([0, 0.25, 0.5, 0.75, 1])
        ax.set_title(_name(labels, weights, m))
        ax.set_xlabel("layer t")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True, nbins=8))
        ax.set_ylabel(r"$\rho_t$ = share of tokens tilted to $v_{1,t}$")
    fig.suptitle("Share of tokens whose alignment with the layer's leading eigenvector increases (Monte Carlo p "
                 "against random subspaces, Holm across layers; dotted: 0.5).\nWhere the null's 95th percentile "
                 "reaches 1, even rho = 1 is not significant: random directions tilt every token too.", y=1.03,
                 fontsize=9)
    fig.tight_layout()
    legend_below(fig, *unique_handles(axes), ncol=3)
    return save(fig, stem, dpi)


def _no_shared(stem) -> str:
    if TRAINED["model"] == "twins":
        return "no random-weight twin of a shared-weight (ALBERT) model in this run"
    return ("no shared-weight (ALBERT) model with trained weights in this run\n(random-weight twins: "
            f"{Path(stem).name}{TWIN_SUFFIX})")


def fig_albert_consensus(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int):
    """Shared-weight models: alignment with v_1, with the leading subspace of I + F, and mean pairwise |cos|
    vs step, in both modes (colour: quantity; line style: mode)."""
    style()
    models = [m for m in df["model"].unique() if df[df["model"] == m]["shared"].iloc[0]]
    if not models:
        return placeholder(stem, _no_shared(stem), dpi)
    fig, axes = grid(len(models), ncols=2, size=4.6)
    qty = [("gamma", r"$|\cos(x, v_1)|$ (F's leading eigenvector)"),
           ("span_M_alignment", "alignment with the leading subspace of I + F"),
           ("pairwise_abs_cos", "mean pairwise |cos| between tokens (consensus: 1)")]
    for ax, m in zip(axes, models):
        for mode, g in df[df["model"] == m].groupby("mode", sort=True):
            model_mode = mode == "model"
            for i, (col, _) in enumerate(qty):
                ax.plot(g["layer"] + 1, g[col], color=f"C{i}", lw=2.2 if model_mode else 1.2,
                        ls=":" if model_mode else "-", marker="o" if model_mode else None, ms=3,
                        alpha=0.9, zorder=3 if model_mode else 2)
        ax.set_xscale("log")
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(_name(labels, weights, m))
        ax.set_xlabel("step t (applications of the shared layer)")
        ax.set_ylabel("alignment or cosine")
    hs = [Line2D([], [], color=f"C{i}", lw=1.5) for i in range(len(qty))]
    hs += [Line2D([], [], color="0.3", lw=1.2), Line2D([], [], color="0.3", lw=2.2, ls=":", marker="o", ms=3)]
    fig.suptitle("Shared weights: consensus and alignment with the leading eigenvectors over the long "
                 "attention-only run and the model's own depth", y=1.0, fontsize=9)
    fig.tight_layout()
    legend_below(fig, hs, [q[1] for q in qty] + ["attention-only law (long run)", "real forward pass (model's depth)"],
                 ncol=2)
    return save(fig, stem, dpi)


def fig_albert_rotation(runs: list[dict], stem, dpi: int):
    """Token trajectories of shared-weight models projected on the leading plane (attention-only runs), axes
    fitted to the data, with the rotation per step predicted and measured side by side (no pre-registered
    criterion: reported, not judged).

    ``runs``: dicts with label, weights, trajectory (steps+1, n, 2), leading_type, arg_mu1, mean_dtheta,
    rotation_plane."""
    style()
    if not runs:
        return placeholder(stem, _no_shared(stem), dpi)
    fig, axes = grid(len(runs), ncols=2, size=4.2)
    for ax, r in zip(axes, runs):
        tr = r["trajectory"]
        n = tr.shape[1]
        for j in range(n):
            ax.plot(tr[:, j, 0], tr[:, j, 1], lw=0.7, color="C0", alpha=0.5)
            ax.scatter(tr[0, j, 0], tr[0, j, 1], s=14, marker="x", color="0.2", lw=0.8, zorder=3)
            ax.scatter(tr[-1, j, 0], tr[-1, j, 1], s=14, color="C3", zorder=4)
        lo, hi = tr.reshape(-1, 2).min(0), tr.reshape(-1, 2).max(0)
        pad = 0.08 * max(float((hi - lo).max()), 1e-9)
        ax.set_xlim(lo[0] - pad, hi[0] + pad)
        ax.set_ylim(lo[1] - pad, hi[1] + pad)
        pred = r.get("predicted_dtheta", r["arg_mu1"])
        diff = r["mean_dtheta"] - pred
        rel = abs(diff) / abs(pred) if pred else float("nan")
        ax.set_title(f"{panel_title(r['label'], r['weights'])}: {n} tokens of the first prompt\n"
                     f"leading eigenvalue of F: {r['leading_type']}", fontsize=8)
        ax.text(0.02, 0.98, f"rotation per step in this plane\npredicted {pred:+.3f} rad (arg of I + F's eigenvalue)"
                f"\nmeasured {r['mean_dtheta']:+.3f} rad (last 20 steps)\ndifference {diff:+.3f} rad "
                f"({rel:.0%}); no pre-registered\ncriterion: reported, not judged", transform=ax.transAxes,
                va="top", fontsize=6.5, bbox={"facecolor": "white", "alpha": 0.85, "lw": 0})
        ax.set_xlabel(f"coordinate 1 in the plane: {r['rotation_plane']}")
        ax.set_ylabel("coordinate 2")
    fig.suptitle("Token trajectories (unit vectors) of the attention-only law projected on the leading plane "
                 "(tokens that coincide draw one line)", y=1.0, fontsize=9)
    fig.tight_layout()
    legend_below(fig, [Line2D([], [], color="C0", lw=0.8), Line2D([], [], ls="", marker="x", color="0.2"),
                       Line2D([], [], ls="", marker="o", color="C3")],
                 ["a token's trajectory", "step 0 (the embedding)", "final step"], ncol=3)
    return save(fig, stem, dpi)


def rotation_runs(csvs: list, npzs: list, shared: dict, labels: dict, weights: dict,
                  last_steps: int = 20) -> list[dict]:
    """What :func:`fig_albert_rotation` draws: for every shared-weight model's attention-only run, its token
    trajectories (the .npz), the leading type and the rotation predicted per step, and the measured rotation
    (mean_dtheta averaged over the run's last ``last_steps`` steps)."""
    runs = []
    for csv, npz in zip(csvs, npzs):
        g = pd.read_csv(csv)
        m = g["model"].iloc[0]
        if not (shared[m] and g["mode"].iloc[0] == "attention-only"):
            continue
        with np.load(npz, allow_pickle=False) as z:
            tr = z["trajectory"]  # (steps + 1, n_traj, 2)
        runs.append({"label": labels.get(m, m), "weights": weights[m], "trajectory": tr,
                     "leading_type": g["leading_type"].iloc[0], "arg_mu1": float(g["arg_mu1"].iloc[0]),
                     "predicted_dtheta": float(g["predicted_dtheta"].iloc[0]) if "predicted_dtheta" in g
                     else float(g["arg_mu1"].iloc[0]),
                     "rotation_plane": g["rotation_plane"].iloc[0],
                     "mean_dtheta": float(g.iloc[-last_steps:]["mean_dtheta"].mean())})
    return runs


def _claim_note(g: pd.DataFrame, claim: str, crit: dict, alpha: float) -> str:
    """A claim's one p and its specificity p on one model's table ("" if it has neither)."""
    from powerlens.analysis.claims.layer_criteria import parts
    from powerlens.core.fmt import fmt_num

    x = parts(g, claim, {**crit, "alpha": alpha})[0]
    if x.conj is None or np.isnan(x.conj.p):
        return ""
    return (f"claim p {fmt_num(x.conj.p)} (attainable {fmt_num(x.attainable)})"
            + (f", specificity p {fmt_num(x.spec.p)}" if x.spec is not None else ""))


def fig_tilt(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int, *, alpha: float, crit: dict,
             full: pd.DataFrame | None = None, controls: dict[str, str] | None = None):
    """The tilt a(t+1) - a(t) towards each layer's v_1 (C1 in the attention-only law; C10 in the real forward
    pass split at the sublayers), one panel per model: the law's tilt and the real pass's attention and FFN
    sublayer tilts, each with the random-direction null's 95th percentile as a thin line; marks are the per-layer
    Holm decisions of the random-direction null (the claims read one p across the layers, written in the panel
    with its specificity p); the model's matched random-layer control (``controls``, its rows in ``full``)
    drawn beside the law in grey."""
    style()
    full = df if full is None else full
    controls = controls or {}
    models = list(df["model"].unique())
    fig, axes = grid(len(models), ncols=3, size=3.5)
    curves = (("attention-only", "tilt", "C0", "--", "law (attention-only)"),
              ("model", "attn_tilt", "C1", "-", "real pass: attention sublayer"),
              ("model", "ffn_tilt", "C2", "-.", "real pass: FFN sublayer"))
    for ax, m in zip(axes, models):
        notes = []
        for mode, stat, c, ls, name in curves:
            g = df[(df["model"] == m) & (df["mode"] == mode)]
            g = g[g[f"{stat}_p_holm"].notna()] if f"{stat}_p_holm" in g else g.iloc[:0]
            if not len(g):
                continue
            ax.plot(g["layer"], g[stat], color=c, lw=1.1, ls=ls, label=f"{name}: tilt")
            _marks(ax, g, stat, 0.0, alpha, c, name)
            ax.plot(g["layer"], g[f"{stat}_null_q95"], color=c, lw=0.7, ls=(0, (1, 1.5)),
                    label=f"{name}: random directions' 95th percentile")
            claim = {"tilt": "C1", "attn_tilt": "C10"}.get(stat)
            note = _claim_note(g, claim, crit, alpha) if claim else ""
            if note:
                notes.append((c, f"{claim}: {note}"))
        ctrl = controls.get(m)
        g = full[(full["model"] == ctrl) & (full["mode"] == "attention-only")] if ctrl else full.iloc[:0]
        g = g[g["tilt_p_holm"].notna()] if "tilt_p_holm" in g else g.iloc[:0]
        if len(g):
            ax.plot(g["layer"], g["tilt"], color="0.45", lw=1.0, ls="--", marker=".", ms=3,
                    label="matched control (random layer weights): law tilt")
            note = _claim_note(g, "C1", crit, alpha)
            if note:
                notes.append(("0.35", f"control C1: {note}"))
        for k, (c, text) in enumerate(reversed(notes)):  # above the axes, under the title: no curve hidden
            ax.text(0.0, 1.015 + 0.055 * k, text, transform=ax.transAxes, fontsize=5.8, color=c, va="bottom")
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_title(_name(labels, weights, m), pad=4 + 8.5 * len(notes))
        ax.set_xlabel("layer t")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True, nbins=8))
        ax.set_ylabel(r"tilt $a(t+1) - a(t)$ towards $v_{1,t}$")
    fig.suptitle("Tilt of the tokens towards each layer's leading eigenvector v_1 (C1: the attention-only law; C10: "
                 "the real forward pass split at the sublayers).\nMarks: per-layer Holm against random directions; "
                 "the claims read one p across the layers (in each panel) and the lead's rank among F's other "
                 "eigen-directions (specificity p).", y=1.03, fontsize=9)
    fig.tight_layout()
    legend_below(fig, *unique_handles(axes), ncol=3)
    return save(fig, stem, dpi)


def dynamics_figures(csvs: list, npzs: list, metas: list, labels: dict, *, alpha: float, crit: dict, dpi: int,
                     stems: dict) -> pd.DataFrame:
    """fig_gamma, fig_rho, fig_tilt, fig_albert_consensus, fig_albert_rotation and table_alignment from the dynamics
    step's CSVs and arrays and each model's weights.json; ``stems`` maps each output's name to its path
    without suffix. Returns the alignment table."""
    meta = {m["model"]: m for m in map(read_json, metas)}
    shared = {m: x["shared_weights"] for m, x in meta.items()}
    controls = {x["control_of"]: m for m, x in meta.items() if x.get("control_of")}
    df = pd.concat([pd.read_csv(p) for p in csvs], ignore_index=True)
    df["shared"] = df["model"].map(shared)
    weights = dict(zip(df["model"], df["weights"]))
    draw_split(lambda d, s: fig_gamma(d, labels, weights, s, dpi, alpha=alpha), df, weights, stems["fig_gamma"], dpi,
               "fig_gamma")
    draw_split(lambda d, s: fig_rho(d, labels, weights, s, dpi, alpha=alpha), df, weights, stems["fig_rho"], dpi, "fig_rho")
    draw_split(lambda d, s: fig_tilt(d, labels, weights, s, dpi, alpha=alpha, crit=crit, full=df, controls=controls),
               df, weights, stems["fig_tilt"], dpi, "fig_tilt")
    draw_split(lambda d, s: fig_albert_consensus(d, labels, weights, s, dpi), df, weights,
               stems["fig_albert_consensus"], dpi, "fig_albert_consensus")
    draw_split(lambda d, s: fig_albert_rotation(d, s, dpi), rotation_runs(csvs, npzs, shared, labels, weights),
               weights, stems["fig_albert_rotation"], dpi, "fig_albert_rotation")
    t = alignment_table(df, labels, alpha=alpha, crit=crit)
    write_table(t, stems["table_alignment"], caption="Alignment of tokens with each layer's leading eigenvector: "
                "gamma vs null models; rho > 0.5 and the tilt decided against the Monte Carlo null of random "
                "directions after Holm (sign tests only as secondary columns).",
                missing=ALIGNMENT_MISSING)
    return t

