"""fig_gamma, fig_rho (per depth, against the Monte Carlo null), ALBERT's consensus and rotation, and
the driver that draws them from the dynamics step's files."""

from __future__ import annotations

from pathlib import Path

import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from powerlens.analysis.verdict_tests import (ATTN_TILT, FFN_TILT, GAMMA, RHO, TILT, Field, Sums, TestSpec,
                                              layer_marks, own_depth, saturated, tested)
from powerlens.core.io import read_json
from powerlens.outputs.figures.style import _name, in_model_order, model_rank
from powerlens.outputs.plotting import (
    TRAINED,
    TWIN_SUFFIX,
    draw_split,
    grid,
    legend_below,
    panel_title,
    placeholder,
    save,
    shorten,
    style,
    wrap_title,
)
from powerlens.outputs.tables import ALIGNMENT_MISSING, alignment_table, write_table


def _depth_note(ax, g_all, g_shown):
    """Say so when a long shared-weight run is shown over the model's own depth only."""
    if len(g_all) > len(g_shown):
        ax.text(0.98, 0.02, f"law: steps 0-{int(g_shown['layer'].max())} of {len(g_all)}", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=8, color="0.35")


def _marks(ax, g, spec: TestSpec, above: float, alpha: float, color: str) -> None:
    """Filled: the per-layer Holm mark (the dynamics table's decided ``<stat>_sig``: the random-direction null
    after Holm across layers, the claimed side of its bound, not saturated); open: not significant; cross:
    saturated (half or more of the null's draws tie); ring: undecided, the Holm-adjusted 99% interval of the
    random-direction p straddles alpha at the draws this layer got (a layer is extended only where a claim's
    verdict can move, paper.md section 4d). Unlabelled: :func:`_mark_legend` explains them once, in grey."""
    marks = layer_marks(g, spec, alpha=alpha, above=above)
    sig, und = marks == "yes", marks == "undecided"
    sat = saturated(g, spec) & ~und
    stat = spec.value
    kw = {"zorder": 4, "clip_on": False}
    ax.scatter(g["layer"][sig], g[stat][sig], color=color, s=22, **kw)
    ax.scatter(g["layer"][und], g[stat][und], facecolors="none", edgecolors=color, s=46, linewidths=1.3, **kw)
    rest = ~(sig | und) & ~sat
    ax.scatter(g["layer"][rest], g[stat][rest], facecolors="white", edgecolors=color, s=16, **kw)
    ax.scatter(g["layer"][sat], g[stat][sat], color=color, marker="x", s=22, **kw)


def _mark_legend(fig, alpha: float) -> None:
    """The markers' legend (grey, above the panels): what each per-layer mark means (the lines' legend is below)."""
    c = "0.3"
    hs = [Line2D([], [], ls="", marker="o", color=c, ms=5),
          Line2D([], [], ls="", marker="o", mfc="white", color=c, ms=4),
          Line2D([], [], ls="", marker="o", mfc="none", color=c, ms=7, mew=1.3),
          Line2D([], [], ls="", marker="x", color=c, ms=5)]
    legend_below(fig, hs, [f"Holm p < {alpha:g}", "not significant", "undecided", "saturated"], ncol=4,
                 loc="upper center")


NULL_Q95 = (0, (1, 1.5))  # the random directions' 95th percentile: the threshold a layer's mark is decided at
NULL_MEDIAN = (0, (4, 2))
MODE_NAME = {"attention-only": "law (attention-only)", "model": "real forward pass"}


def _null_handles(median: bool) -> tuple[list, list]:
    hs = [Line2D([], [], color="0.3", lw=0.9, ls=NULL_Q95)]
    ls = ["null's 95th pct. (curve's colour)"]
    if median:
        hs.append(Line2D([], [], color="0.3", lw=0.7, ls=NULL_MEDIAN))
        ls.append("null's median (curve's colour)")
    return hs, ls


def fig_gamma(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int, *, alpha: float):
    """gamma_t vs layer for every layer-varying model, both modes, against the Monte Carlo null (its median and
    95th percentile as thin lines in the mode's colour), with the significance marks of fig_rho."""
    style()
    models = [m for m in df["model"].unique() if not df[df["model"] == m]["shared"].iloc[0]]
    if not models:
        models = list(df["model"].unique())
    fig, axes = grid(len(models), ncols=3)
    modes = []
    for ax, m in zip(axes, models):
        for i, (mode, g) in enumerate(df[df["model"] == m].groupby("mode", sort=True)):
            ls = "-" if mode == "model" else "--"
            g = own_depth(g)
            c = f"C{i}"
            ax.plot(g["layer"], g[GAMMA.value], ls=ls, lw=1.1, color=c)
            if (mode, c, ls) not in modes:
                modes.append((mode, c, ls))
            _marks(ax, g, GAMMA, -np.inf, alpha, c)
            ax.plot(g["layer"], g[GAMMA.col(Field.NULL_Q95)], color=c, lw=0.9, ls=NULL_Q95)
            ax.plot(g["layer"], g[GAMMA.col(Field.NULL_MEDIAN)], color=c, lw=0.7, alpha=0.7, ls=NULL_MEDIAN)
        ax.set_title(_name(labels, weights, m))
        ax.set_xlabel("layer t")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True, nbins=6))
        ax.set_ylim(bottom=0)
    axes[0].set_ylabel(r"$\gamma_t$ (alignment with $v_{1,t}$)")
    hs, ls = _null_handles(median=True)
    legend_below(fig, [Line2D([], [], color=c, ls=s, lw=1.1) for _, c, s in modes] + hs,
                 [MODE_NAME.get(mo, mo) for mo, _, _ in modes] + ls, ncol=3)
    _mark_legend(fig, alpha)
    return save(fig, stem, dpi)


def fig_rho(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int, *, alpha: float):
    """rho_t vs layer (fraction of tokens whose alignment increases) on [0, 1], the 0.5 line, the Monte Carlo
    null's 95th percentile as a thin line, significance marks as the claims count them."""
    style()
    models = list(df["model"].unique())
    fig, axes = grid(len(models), ncols=3)
    modes = []
    for ax, m in zip(axes, models):
        for i, (mode, g_all) in enumerate(df[df["model"] == m].groupby("mode", sort=True)):
            g = own_depth(g_all)
            c, ls = f"C{i}", "-" if mode == "model" else "--"
            ax.plot(g["layer"], g[RHO.value], color=c, lw=1.1, ls=ls)
            if (mode, c, ls) not in modes:
                modes.append((mode, c, ls))
            _marks(ax, g, RHO, 0.5, alpha, c)
            ax.plot(g["layer"], g[RHO.col(Field.NULL_Q95)], color=c, lw=0.9, ls=NULL_Q95)
            if mode == "attention-only":
                _depth_note(ax, g_all, g)
        ax.axhline(0.5, color="0.3", lw=0.8, ls="-.")
        ax.set_ylim(0, 1)
        ax.set_yticks([0, 0.25, 0.5, 0.75, 1])
        ax.set_title(_name(labels, weights, m))
        ax.set_xlabel("layer t")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True, nbins=6))
    axes[0].set_ylabel(r"$\rho_t$ (share of tokens tilted)")
    hs, ls = _null_handles(median=False)
    legend_below(fig, [Line2D([], [], color=c, ls=s, lw=1.1) for _, c, s in modes] + hs
                 + [Line2D([], [], color="0.3", lw=0.8, ls="-.")],
                 [MODE_NAME.get(mo, mo) for mo, _, _ in modes] + ls + ["0.5"], ncol=3)
    _mark_legend(fig, alpha)
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
    fig, axes = grid(len(models), ncols=2, size=2.4, extra=0.7)
    qty = [(GAMMA.value, r"$|\cos(x, v_1)|$"), (Sums.SPAN_M, "alignment, lead subspace of I + F"),
           (Sums.PAIRWISE_ABS_COS, "mean pairwise |cos|")]
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
        ax.set_xlabel("step t (shared layer applied)")
    axes[0].set_ylabel("alignment or cosine")
    hs = [Line2D([], [], color=f"C{i}", lw=1.5) for i in range(len(qty))]
    hs += [Line2D([], [], color="0.3", lw=1.2), Line2D([], [], color="0.3", lw=2.2, ls=":", marker="o", ms=3)]
    legend_below(fig, hs, [q[1] for q in qty] + ["law (long run)", "real pass (model's depth)"], ncol=3)
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
    fig, axes = grid(len(runs), ncols=2, size=3.0, extra=0.5)
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
        pred = r.get(Sums.PREDICTED_DTHETA, r[Sums.ARG_MU1])
        ax.set_title(wrap_title(f"{panel_title(r['label'], r['weights'])}: {r[Sums.LEADING_TYPE]}", 34))
        ax.text(0.02, 0.98, f"rad per step\npredicted {pred:+.3f}\nmeasured {r[Sums.MEAN_DTHETA]:+.3f}",
                transform=ax.transAxes, va="top", fontsize=8, bbox={"facecolor": "white", "alpha": 0.85, "lw": 0})
        ax.set_xlabel(shorten(f"plane coordinate 1: {r[Sums.ROTATION_PLANE]}", 44))
        ax.set_ylabel("coordinate 2")
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
                     Sums.LEADING_TYPE: g[Sums.LEADING_TYPE].iloc[0], Sums.ARG_MU1: float(g[Sums.ARG_MU1].iloc[0]),
                     Sums.PREDICTED_DTHETA: float(g[Sums.PREDICTED_DTHETA].iloc[0]) if Sums.PREDICTED_DTHETA in g
                     else float(g[Sums.ARG_MU1].iloc[0]),
                     Sums.ROTATION_PLANE: g[Sums.ROTATION_PLANE].iloc[0],
                     Sums.MEAN_DTHETA: float(g.iloc[-last_steps:][Sums.MEAN_DTHETA].mean())})
    return runs


def fig_tilt(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int, *, alpha: float,
             full: pd.DataFrame | None = None, controls: dict[str, str] | None = None):
    """The tilt a(t+1) - a(t) towards each layer's v_1 (C1 in the attention-only law; C10 in the real forward
    pass split at the sublayers), one panel per model: the law's tilt and the real pass's attention and FFN
    sublayer tilts, each with the random-direction null's 95th percentile as a thin line in its colour; marks are
    the per-layer Holm decisions of the random-direction null; the model's first matched control
    (``controls``, its rows in ``full``) drawn beside the law in grey. The claims' own p's (one p across the
    layers and the specificity p) are table_alignment's and table_claims'."""
    style()
    full = df if full is None else full
    controls = controls or {}
    models = list(df["model"].unique())
    fig, axes = grid(len(models), ncols=3)
    curves = (("attention-only", TILT, "C0", "--", "law (attention-only)"),
              ("model", ATTN_TILT, "C1", "-", "real pass: attention"),
              ("model", FFN_TILT, "C2", "-.", "real pass: FFN"))
    shown: dict[str, Line2D] = {}
    for ax, m in zip(axes, models):
        for mode, spec, c, ls, name in curves:
            g = df[(df["model"] == m) & (df["mode"] == mode)]
            g = tested(g, spec)
            if not len(g):
                continue
            ax.plot(g["layer"], g[spec.value], color=c, lw=1.1, ls=ls)
            shown.setdefault(name, Line2D([], [], color=c, lw=1.1, ls=ls))
            _marks(ax, g, spec, 0.0, alpha, c)
            ax.plot(g["layer"], g[spec.col(Field.NULL_Q95)], color=c, lw=0.8, ls=NULL_Q95)
        ctrl = controls.get(m)
        g = full[(full["model"] == ctrl) & (full["mode"] == "attention-only")] if ctrl else full.iloc[:0]
        g = tested(g, TILT)
        if len(g):
            ax.plot(g["layer"], g[TILT.value], color="0.45", lw=1.0, ls=":", marker=".", ms=4, zorder=2)
            shown.setdefault("control: law", Line2D([], [], color="0.45", lw=1.0, ls=":", marker=".", ms=4))
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_title(_name(labels, weights, m))
        ax.set_xlabel("layer t")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True, nbins=6))
    axes[0].set_ylabel(r"tilt $a(t+1) - a(t)$")
    hs, ls = _null_handles(median=False)
    legend_below(fig, list(shown.values()) + hs, list(shown) + ["random dirs' 95th pct. (curve's colour)"], ncol=3)
    _mark_legend(fig, alpha)
    return save(fig, stem, dpi)


def gamma_gap_pairs(df: pd.DataFrame, spectra: list, shared: dict, controls: dict, labels: dict,
                    weights: dict) -> list[dict]:
    """What fig_gamma_gap draws: per layer-varying model with a spectra table (C8 judges those only), the points
    C8 correlates and its matched control's (grey beside it)."""
    from powerlens.outputs.figures.spectra import gamma_gap_points

    spec = {}
    for p in spectra:
        s = pd.read_csv(p)
        spec[s["model"].iloc[0]] = s
    pts = {m: gamma_gap_points(df[df["model"] == m], spec[m]) for m in df["model"].unique()
           if m in spec and not shared.get(m)}
    return [{"label": labels.get(m, m), "weights": weights[m], "points": p, "control": pts.get(controls.get(m, ""))}
            for m, p in pts.items()]


def dynamics_figures(csvs: list, npzs: list, metas: list, labels: dict, *, crit: dict, dpi: int,
                     stems: dict, spectra: list = (), parts: dict | None = None) -> pd.DataFrame:
    """fig_gamma, fig_rho, fig_tilt, fig_albert_consensus, fig_albert_rotation, fig_gamma_gap (with the spectra
    step's CSVs ``spectra``, where ``stems`` names it) and table_alignment from the dynamics step's CSVs and
    arrays and each model's weights.json; ``stems`` maps each output's name to its path without suffix; ``crit``
    the decision rule (:func:`~powerlens.analysis.verdict_tests.decision_rule`); ``parts`` which of each figure's
    two parts (trained, random weights) the run writes (:func:`~powerlens.outputs.plotting.draw_split`; all where
    it says nothing). Returns the alignment table."""
    from powerlens.analysis.claims import controls_of
    from powerlens.outputs.figures.spectra import fig_gamma_gap

    meta = {m["model"]: m for m in map(read_json, metas)}
    shared = {m: x["shared_weights"] for m, x in meta.items()}
    controls = {m: ctl[0] for m, ctl in controls_of(meta).items()}  # the first seed's, drawn for scale
    df = in_model_order(pd.concat([pd.read_csv(p) for p in csvs], ignore_index=True), model_rank(meta))
    df["shared"] = df["model"].map(shared)
    weights = dict(zip(df["model"], df["weights"]))
    alpha = crit["alpha"]
    parts = parts or {}
    draws = {"fig_gamma": (lambda d, s: fig_gamma(d, labels, weights, s, dpi, alpha=alpha), df),
             "fig_rho": (lambda d, s: fig_rho(d, labels, weights, s, dpi, alpha=alpha), df),
             "fig_tilt": (lambda d, s: fig_tilt(d, labels, weights, s, dpi, alpha=alpha, full=df, controls=controls),
                          df),
             "fig_albert_consensus": (lambda d, s: fig_albert_consensus(d, labels, weights, s, dpi), df),
             "fig_albert_rotation": (lambda d, s: fig_albert_rotation(d, s, dpi),
                                     rotation_runs(csvs, npzs, shared, labels, weights))}
    if stems.get("fig_gamma_gap"):
        draws["fig_gamma_gap"] = (lambda d, s: fig_gamma_gap(d, s, dpi),
                                  gamma_gap_pairs(df, spectra, shared, controls, labels, weights))
    for name, (draw, data) in draws.items():
        draw_split(draw, data, weights, stems[name], dpi, name, parts=tuple(parts.get(name, (True, True))))
    t = alignment_table(df, labels, crit=crit)
    write_table(t, stems["table_alignment"], caption="Alignment of tokens with each layer's leading eigenvector: "
                "gamma vs null models; rho > 0.5 and the tilt decided against the Monte Carlo null of random "
                "directions after Holm (sign tests only as secondary columns).",
                missing=ALIGNMENT_MISSING)
    return t

