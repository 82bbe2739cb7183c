"""fig_steering: the rank-1 edit against activation addition, one row per model."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from powerlens.outputs.figures.style import _name
from powerlens.outputs.plotting import legend_below, plt, save, style


def fig_steering(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int):
    """One row per model. Left: mean |cos(x_i, u)| after the edited last layer vs the norm of the change the
    residual stream receives (rank-1 edit in both modes, activation addition at matched norm), each rank-1
    point labelled with its kappa. Right: mean probability of the target token, the unsteered model (kappa 0)
    as a grey line. Colour: target; line style: method."""
    style()
    models = list(df["model"].unique())
    fig, axes = plt.subplots(len(models), 2, figsize=(10, 3.0 * len(models)), squeeze=False)
    targets: list[str] = []
    pu = False
    for j, m in enumerate(models):
        g = df[(df["model"] == m) & (df["kappa"] >= 0)]
        left, right = axes[j]
        has_p = bool(g["p_target"].notna().any())
        real = g[g["method"].str.startswith("rank-1") & (g["kappa"] > 0)]["cos_after_layer_model"]
        inset = None
        if len(real) and float(real.max()) < 0.25:  # the real pass hugs 0 on a 0-1 axis: shown again, zoomed
            inset = left.inset_axes([0.5, 0.42, 0.47, 0.5])
        for tgt, gt in g.groupby("target", sort=False):
            kind = tgt.split(":")[0]
            if kind not in targets:
                targets.append(kind)
            c, below = f"C{targets.index(kind)}", targets.index(kind) % 2 == 1
            pu |= _steering_curves(left, right, gt, c, has_p, below=below)
            if inset is not None:
                _real_pass(inset, gt, c, below)
        _steering_axes(left, right, _name(labels, weights, m), has_p)
        if inset is not None:
            inset.set_xscale("log")
            inset.set_title("real forward pass, zoomed", fontsize=7)
            inset.tick_params(labelsize=6)
    hs, ls = _steering_legend(targets, pu)
    fig.suptitle("Steering by a rank-1 change of the last layer's output matrix vs activation addition at the same "
                 "site, over the norm of the change there (one point per kappa > 0)", y=1.0, fontsize=9)
    fig.tight_layout()
    legend_below(fig, hs, ls, ncol=2)
    return save(fig, stem, dpi)


def _kappa_labels(ax, x, y, kappas, c, below: bool = False) -> None:
    """kappa beside each point: one target above its points, the next below (labels of two targets never sit on
    one another), alternately left and right of neighbouring points."""
    for i, (xi, yi, k) in enumerate(zip(x, y, kappas)):
        ax.annotate(f"{k:g}", (xi, yi), textcoords="offset points", xytext=(-5 if i % 2 else 5, -10 if below else 4),
                    fontsize=6, color=c, ha="right" if i % 2 else "left")


def _steering_curves(left, right, gt: pd.DataFrame, c: str, has_p: bool, below: bool = False) -> bool:
    """One target's curves (colour ``c``); True where a norm follows W_O (the p * u curve is drawn)."""
    r1 = gt[gt["method"].str.startswith("rank-1")]
    aa = gt[gt["method"].str.startswith("activation")]
    r0 = r1[r1["kappa"] == 0]
    r1, aa = r1[r1["kappa"] > 0], aa[aa["kappa"] > 0]
    x1 = r1["change_norm_model"]
    left.plot(x1, r1["cos_after_layer_model"], "-o", ms=3.5, color=c)
    _kappa_labels(left, x1, r1["cos_after_layer_model"], r1["kappa"], c, below)
    left.plot(r1["change_norm_attention_only"], r1["cos_after_layer_attention_only"], "--", color=c)
    left.plot(aa["change_norm_model"], aa["cos_after_layer_model"], ":s", ms=3, color=c)
    pu = "cos_pu_after_layer_model" in r1 and bool(r1["cos_pu_after_layer_model"].notna().any())
    if pu:  # a norm follows W_O (Gemma 3): what the residual stream receives points along p * u
        left.plot(x1, r1["cos_pu_after_layer_model"], "-.^", ms=5.5, mfc="white", mew=1.0, color=c)
        cap = float(r1["post_norm_cap"].iloc[0])
        left.axvline(cap, color="0.5", lw=0.8, ls=(0, (1, 3)))
        left.text(cap, 0.95, " cap", fontsize=7, color="0.4", va="top")
    if has_p and r1["p_target"].notna().any():
        right.plot(x1, r1["p_target"], "-o", ms=3.5, color=c)
        _kappa_labels(right, x1, r1["p_target"], r1["kappa"], c, below)
        right.plot(aa["change_norm_model"], aa["p_target"], ":s", ms=3, color=c)
        if len(r0) and np.isfinite(r0["p_target"].iloc[0]):
            right.axhline(float(r0["p_target"].iloc[0]), color="0.55", lw=0.9, ls=(0, (4, 2)))
    return pu


def _real_pass(ax, gt: pd.DataFrame, c: str, below: bool) -> None:
    """The real forward pass's curves alone (rank-1 with kappa labels, activation addition, p * u)."""
    r1 = gt[gt["method"].str.startswith("rank-1") & (gt["kappa"] > 0)]
    aa = gt[gt["method"].str.startswith("activation") & (gt["kappa"] > 0)]
    ax.plot(r1["change_norm_model"], r1["cos_after_layer_model"], "-o", ms=3.5, color=c)
    _kappa_labels(ax, r1["change_norm_model"], r1["cos_after_layer_model"], r1["kappa"], c, below)
    ax.plot(aa["change_norm_model"], aa["cos_after_layer_model"], ":s", ms=3, color=c)
    if "cos_pu_after_layer_model" in r1 and r1["cos_pu_after_layer_model"].notna().any():
        ax.plot(r1["change_norm_model"], r1["cos_pu_after_layer_model"], "-.^", ms=5.5, mfc="white", mew=1.0,
                color=c)


def _steering_axes(left, right, name: str, has_p: bool) -> None:
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_xlabel("norm of the change the residual stream receives")
    left.set_ylim(0, 1.05)
    left.set_ylabel(r"mean $|\cos(x_i, u)|$")
    left.set_title(f"{name}: alignment with the target u", fontsize=8.5)
    right.set_title(f"{name}: probability of the target token", fontsize=8.5)
    if has_p:
        right.set_yscale("log")
        right.set_ylabel("mean P(target token)")
    else:
        right.text(0.5, 0.5, "no LM head (an encoder): no target-token probability;\nvector alignment only (left)",
                   ha="center", va="center", transform=right.transAxes, fontsize=8, color="0.35")
        right.set_axis_off()  # no empty frame: there is nothing to plot


def _steering_legend(targets: list[str], pu: bool) -> tuple[list, list[str]]:
    hs = [Line2D([], [], color=f"C{i}", lw=2) for i in range(len(targets))]
    ls = [f"target: {t} (u = {'its row' if t != 'random' else 'a seeded random unit vector'})" for t in targets]
    hs += [Line2D([], [], color="0.3", ls="-", marker="o", ms=3), Line2D([], [], color="0.3", ls="--"),
           Line2D([], [], color="0.3", ls=":", marker="s", ms=3), Line2D([], [], color="0.55", ls=(0, (4, 2)))]
    ls += ["rank-1 change of W_O, real forward pass (numbers: kappa)", "rank-1 change, attention-only law",
           "activation addition, same site and norm of change", "unsteered model (kappa = 0)"]
    if pu:
        hs.append(Line2D([], [], color="0.3", ls="-.", marker="^", ms=5.5, mfc="white"))
        ls.append("rank-1: alignment with p * u (post-attention norm gain p; dotted: its cap)")
    return hs, ls

