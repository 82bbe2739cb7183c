"""fig_steering: the rank-1 edit against activation addition, one row per model."""

from __future__ import annotations

import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from powerlens.outputs.figures.style import _name
from powerlens.outputs.plotting import legend_below, plt, save, style


def fig_steering(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int):
    """One row per model, four panels (paper.md section 4d, C9): (1) the real forward pass, mean |cos(x_i, u)|
    after the edited last layer against the norm of the change the residual stream receives, the rank-1 edit
    (each point labelled with its kappa) and activation addition at matched norm; (2) the attention-only law on
    axes of its own; (3) alignment against the KL on unrelated prompts, the edit per kappa and activation
    addition over its beta sweep; (4) the probability of the target token against that KL. Colour: target."""
    style()
    models = list(df["model"].unique())
    fig, axes = plt.subplots(len(models), 4, figsize=(13, 2.7 * len(models)), squeeze=False)
    targets: list[str] = []
    pu = False
    for j, m in enumerate(models):
        g = df[df["model"] == m]
        row = axes[j]
        has_kl = "kl_unrelated" in g and bool(g["kl_unrelated"].notna().any())
        for tgt, gt in g[g["kappa"].fillna(-9) >= 0].groupby("target", sort=False):
            kind = tgt.split(":")[0]
            if kind not in targets:
                targets.append(kind)
            c, below = f"C{targets.index(kind)}", targets.index(kind) % 2 == 1
            pu |= _steering_curves(row[0], row[1], gt, c, below=below)
            if has_kl:
                _kl_curves(row[2], row[3], gt, g[(g["target"] == tgt) & g["method"].str.contains("sweep")], c)
        _steering_axes(row, _name(labels, weights, m), has_kl)
    hs, ls = _steering_legend(targets, pu)
    fig.suptitle("Steering by a rank-1 change of the last layer's output matrix vs activation addition at the same "
                 "site: over the norm of the change (real pass; the law on its own axes) and over the KL on "
                 "unrelated prompts", y=1.0, fontsize=9)
    fig.tight_layout()
    legend_below(fig, hs, ls, ncol=3)
    return save(fig, stem, dpi)


def _kappa_labels(ax, x, y, kappas, c, below: bool = False) -> None:
    """kappa beside each point: one target above its points, the next below (labels of two targets never sit on
    one another), alternately left and right of neighbouring points."""
    for i, (xi, yi, k) in enumerate(zip(x, y, kappas)):
        ax.annotate(f"{k:g}", (xi, yi), textcoords="offset points", xytext=(-5 if i % 2 else 5, -10 if below else 4),
                    fontsize=6, color=c, ha="right" if i % 2 else "left")


def _steering_curves(real, law, gt: pd.DataFrame, c: str, below: bool = False) -> bool:
    """One target's curves over the norm of the change (colour ``c``): the real pass on ``real``, the law on
    ``law``; True where a norm follows W_O (the p * u curve is drawn)."""
    r1 = gt[gt["method"].str.startswith("rank-1") & (gt["kappa"] > 0)]
    aa = gt[gt["method"].str.contains("matched norm") & (gt["kappa"] > 0)]
    x1 = r1["change_norm_model"]
    real.plot(x1, r1["cos_after_layer_model"], "-o", ms=3.5, color=c)
    _kappa_labels(real, x1, r1["cos_after_layer_model"], r1["kappa"], c, below)
    real.plot(aa["change_norm_model"], aa["cos_after_layer_model"], ":s", ms=3, color=c)
    law.plot(r1["change_norm_attention_only"], r1["cos_after_layer_attention_only"], "--o", ms=3, color=c)
    _kappa_labels(law, r1["change_norm_attention_only"], r1["cos_after_layer_attention_only"], r1["kappa"], c, below)
    pu = "cos_pu_after_layer_model" in r1 and bool(r1["cos_pu_after_layer_model"].notna().any())
    if pu:  # a norm follows W_O (Gemma 3): what the residual stream receives points along p * u
        real.plot(x1, r1["cos_pu_after_layer_model"], "-.^", ms=5.5, mfc="white", mew=1.0, color=c)
        cap = float(r1["post_norm_cap"].iloc[0])
        real.axvline(cap, color="0.5", lw=0.8, ls=(0, (1, 3)))
        real.annotate("cap", (cap, 1.0), xytext=(-3, -3), textcoords="offset points", fontsize=7, color="0.4",
                      ha="right", va="top")
        if "cos_ceiling" in r1 and r1["cos_ceiling"].notna().any():
            real.axhline(float(r1["cos_ceiling"].iloc[0]), color=c, lw=0.8, ls=(0, (2, 2)))
    return pu


def _kl_curves(ax_cos, ax_p, gt: pd.DataFrame, sweep: pd.DataFrame, c: str) -> None:
    """Alignment and P(target) against the KL on unrelated prompts: the edit per kappa (solid, points) and
    activation addition over its beta sweep (dotted)."""
    r1 = gt[gt["method"].str.startswith("rank-1") & (gt["kappa"] > 0)]
    sw = sweep.sort_values("kl_unrelated")
    ax_cos.plot(r1["kl_unrelated"], r1["cos_after_layer_model"], "-o", ms=3.5, color=c)
    ax_cos.plot(sw["kl_unrelated"], sw["cos_after_layer_model"], ":", lw=1.3, color=c)
    if r1["p_target"].notna().any():
        ax_p.plot(r1["kl_unrelated"], r1["p_target"], "-o", ms=3.5, color=c)
        ax_p.plot(sw["kl_unrelated"], sw["p_target"], ":", lw=1.3, color=c)


def _steering_axes(row, name: str, has_kl: bool) -> None:
    real, law, kl_cos, kl_p = row
    for ax, what in ((real, "real forward pass"), (law, "attention-only law")):
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # no crowded minor labels
        ax.set_xlabel("norm of the change the residual stream receives")
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{name}: {what}", fontsize=8)
    real.set_ylabel(r"mean $|\cos(x_i, u)|$ after the layer")
    if not has_kl:
        for ax in (kl_cos, kl_p):
            ax.text(0.5, 0.5, "no LM head (an encoder): no KL or\ntarget probability; compared at matched\nnorm "
                    "of change (left)", ha="center", va="center", transform=ax.transAxes, fontsize=7.5, color="0.35")
            ax.set_axis_off()
        return
    for ax in (kl_cos, kl_p):
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("KL from the unsteered model (unrelated prompts)")
    kl_cos.set_ylim(0, 1.05)
    kl_cos.set_title("alignment against KL", fontsize=8)
    kl_p.set_yscale("log")
    kl_p.set_ylabel("mean P(target token)")
    kl_p.set_title("P(target) against KL", fontsize=8)


def _steering_legend(targets: list[str], pu: bool) -> tuple[list, list[str]]:
    hs = [Line2D([], [], color=f"C{i}", lw=2) for i in range(len(targets))]
    ls = [f"target: {t} (u = {'its row' if t != 'random' else 'a seeded random unit vector'})" for t in targets]
    hs += [Line2D([], [], color="0.3", ls="-", marker="o", ms=3), Line2D([], [], color="0.3", ls=":", marker="s", ms=3),
           Line2D([], [], color="0.3", ls=":")]
    ls += ["rank-1 change of W_O (numbers: kappa)", "activation addition at matched norm of change",
           "activation addition, beta sweep (KL panels)"]
    if pu:
        hs.append(Line2D([], [], color="0.3", ls="-.", marker="^", ms=5.5, mfc="white"))
        ls.append("rank-1: alignment with p * u (vertical: the cap; dashed: the largest |cos| it allows)")
    return hs, ls

