"""fig_steering: the rank-1 edit against activation addition, one row per model."""

from __future__ import annotations

import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from powerlens.outputs.plotting import (
    HEIGHT_MAX,
    WIDTH,
    legend_below,
    place_labels,
    plain,
    plt,
    save,
    shorten,
    style,
    wrap_title,
)


def fig_steering(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int):
    """One row per model, three panels (paper.md section 4d, C9): (1) the attention-only law, mean |cos(x_i, u)|
    after the edited last layer against the norm of the change, on an x axis of its own; (2) the real forward
    pass likewise (its changes are orders of magnitude larger), the rank-1 edit (each point labelled with its
    kappa) and activation addition at matched norm; (3) the probability of the target token against the KL on
    unrelated prompts, the edit per kappa and activation addition over its beta sweep (a model without an LM
    head says so in the panel). Colour: target. The alignment-against-KL view is table_steering's. Rows share
    the figure's 5.2 in: a run steering more than 3 models gets flatter rows."""
    style()
    models = list(df["model"].unique())
    fig, axes = plt.subplots(len(models), 3, figsize=(WIDTH, min(HEIGHT_MAX, 1.45 * len(models) + 0.9)),
                             squeeze=False)
    targets: list[str] = []
    pu = False
    kappa_labels: list = []
    for j, m in enumerate(models):
        g = df[df["model"] == m]
        row = axes[j]
        has_kl = "kl_unrelated" in g and bool(g["kl_unrelated"].notna().any())
        for tgt, gt in g[g["kappa"].fillna(-9) >= 0].groupby("target", sort=False):
            kind = tgt.split(":")[0]
            if kind not in targets:
                targets.append(kind)
            c, below = f"C{targets.index(kind)}", targets.index(kind) % 2 == 1
            pu |= _steering_curves(row[1], row[0], gt, c, below=below, labels=kappa_labels)
            if has_kl:
                _kl_curves(row[2], gt, g[(g["target"] == tgt) & g["method"].str.contains("sweep")], c)
        # over 3 rows each axis label once per column (the middle row's): short rows would stack them
        # a long label keeps its ends: 40 characters (two title lines) up to 3 rows, 18 (one line) in flatter rows
        _steering_axes(row, plain(shorten(labels.get(m, m), 40 if len(models) <= 3 else 18)), has_kl,
                       j == len(models) - 1,
                       ylabel=len(models) <= 3 or j == len(models) // 2)
    hs, ls = _steering_legend(targets, pu)
    legend_below(fig, hs[:len(targets)], ls[:len(targets)], ncol=len(targets), loc="upper center")
    legend_below(fig, hs[len(targets):], ls[len(targets):], ncol=2)
    # after the layout: each kappa label where it covers no other text (the kappa the verdict reads placed first)
    place_labels(fig, [t for _, t in sorted(kappa_labels, key=lambda p: p[0])], KAPPA_OFFSETS)
    return save(fig, stem, dpi)


#: Two kappa labels of one curve sit at least this far apart on the log x axis (decades): revision 6's doublings
#: put points a factor 2 apart, whose labels would overlap
LABEL_GAP = 0.5


def _labelled(x) -> list[int]:
    """The points of one curve that carry their kappa: the first, then each at least :data:`LABEL_GAP` decades
    from the last labelled one, and always the last (the kappa the verdict reads), which displaces a label too
    close to it."""
    lx = np.log10(np.maximum(np.asarray(x, dtype=float), 1e-300))
    keep: list[int] = []
    for i, v in enumerate(lx):
        if not keep or v - lx[keep[-1]] >= LABEL_GAP:
            keep.append(i)
    if len(lx) and keep[-1] != len(lx) - 1:
        if lx[-1] - lx[keep[-1]] < LABEL_GAP and len(keep) > 1:
            keep.pop()
        keep.append(len(lx) - 1)
    return keep


#: Where a kappa label may sit beside its point (offset in points, horizontal alignment), in order of preference
KAPPA_OFFSETS = [(4, 4, "left"), (4, -11, "left"), (-4, 4, "right"), (-4, -11, "right"), (0, 7, "center"),
                 (0, -14, "center")]


def _kappa_labels(ax, x, y, kappas, c, below: bool = False, labels: list | None = None) -> None:
    """kappa beside the points :func:`_labelled` picks (half a decade apart at least): one target above its
    points, the next below, on a white ground so that no line runs through a number; each label goes to
    ``labels`` as (priority, annotation) for :func:`~powerlens.outputs.plotting.place_labels` (the last point
    first: the kappa the verdict reads)."""
    x, y, kappas = (np.asarray(v, dtype=float) for v in (x, y, kappas))
    keep = _labelled(x)
    for i in keep:
        t = ax.annotate(f"{kappas[i]:g}", (x[i], y[i]), textcoords="offset points", xytext=(4, -11 if below else 4),
                        fontsize=8, color=c, ha="left", zorder=6,
                        bbox={"boxstyle": "square,pad=0.05", "facecolor": "white", "alpha": 0.8, "lw": 0})
        t.set_in_layout(False)
        if labels is not None:
            labels.append((0 if i == keep[-1] else 1, t))


def _steering_curves(real, law, gt: pd.DataFrame, c: str, below: bool = False, labels: list | None = None) -> bool:
    """One target's curves over the norm of the change (colour ``c``): the real pass on ``real``, the law on
    ``law``; True where a norm follows W_O (the p * u curve is drawn)."""
    r1 = gt[gt["method"].str.startswith("rank-1") & (gt["kappa"] > 0)]
    aa = gt[gt["method"].str.contains("matched norm") & (gt["kappa"] > 0)]
    x1 = r1["change_norm_model"]
    real.plot(x1, r1["cos_after_layer_model"], "-o", ms=3.5, color=c)
    _kappa_labels(real, x1, r1["cos_after_layer_model"], r1["kappa"], c, below, labels)
    real.plot(aa["change_norm_model"], aa["cos_after_layer_model"], ":s", ms=3, color=c)
    law.plot(r1["change_norm_attention_only"], r1["cos_after_layer_attention_only"], "--o", ms=3, color=c)
    _kappa_labels(law, r1["change_norm_attention_only"], r1["cos_after_layer_attention_only"], r1["kappa"], c, below,
                  labels)
    pu = "cos_pu_after_layer_model" in r1 and bool(r1["cos_pu_after_layer_model"].notna().any())
    if pu:  # a norm follows W_O (Gemma 3): what the residual stream receives points along p * u
        real.plot(x1, r1["cos_pu_after_layer_model"], "-.^", ms=5.5, mfc="white", mew=1.0, color=c)
        cap = float(r1["post_norm_cap"].iloc[0])
        if not any(t.get_text() == "cap" for t in real.texts):  # one cap per panel, whatever the targets
            real.axvline(cap, color="0.5", lw=0.8, ls=(0, (1, 3)))
            real.annotate("cap", (cap, 1.0), xytext=(-3, -3), textcoords="offset points", fontsize=8, color="0.4",
                          ha="right", va="top")
        if "cos_ceiling" in r1 and r1["cos_ceiling"].notna().any():
            real.axhline(float(r1["cos_ceiling"].iloc[0]), color=c, lw=0.8, ls=(0, (2, 2)))
    return pu


def _kl_curves(ax_p, gt: pd.DataFrame, sweep: pd.DataFrame, c: str) -> None:
    """P(target) against the KL on unrelated prompts: the edit per kappa (solid, points) and activation addition
    over its beta sweep (dotted)."""
    r1 = gt[gt["method"].str.startswith("rank-1") & (gt["kappa"] > 0)]
    sw = sweep.sort_values("kl_unrelated")
    if r1["p_target"].notna().any():
        ax_p.plot(r1["kl_unrelated"], r1["p_target"], "-o", ms=3.5, color=c)
        ax_p.plot(sw["kl_unrelated"], sw["p_target"], ":", lw=1.3, color=c)


def _steering_axes(row, name: str, has_kl: bool, last: bool, ylabel: bool = True) -> None:
    law, real, kl_p = row
    for ax, what in ((law, "law"), (real, "real pass")):
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # no crowded minor labels
        ax.set_ylim(0, 1.05)
        ax.set_title(wrap_title(f"{name}: {what}", 30))
        if last:
            ax.set_xlabel("norm of the change")
    if ylabel:
        law.set_ylabel(r"mean $|\cos(x_i, u)|$")
    if not has_kl:
        kl_p.text(0.5, 0.5, "no LM head:\nno target probability", ha="center", va="center", transform=kl_p.transAxes,
                  fontsize=8, color="0.35")
        kl_p.set_axis_off()
        return
    kl_p.set_xscale("log")
    kl_p.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    kl_p.set_yscale("log")
    kl_p.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # within a decade minor labels collide
    kl_p.set_title("P(target) against KL")
    if ylabel:
        kl_p.set_ylabel("mean P(target)")
    if last:
        kl_p.set_xlabel("KL (unrelated prompts)")


def _steering_legend(targets: list[str], pu: bool) -> tuple[list, list[str]]:
    hs = [Line2D([], [], color=f"C{i}", lw=2) for i in range(len(targets))]
    ls = [f"target: {t}" for t in targets]
    hs += [Line2D([], [], color="0.3", ls="-", marker="o", ms=3), Line2D([], [], color="0.3", ls=":", marker="s", ms=3),
           Line2D([], [], color="0.3", ls=":")]
    ls += ["rank-1 change of W_O (numbers: kappa)", "activation addition, same norm",
           "activation addition, beta sweep"]
    if pu:
        hs.append(Line2D([], [], color="0.3", ls="-.", marker="^", ms=5.5, mfc="white"))
        ls.append("rank-1: alignment with p * u")
    return hs, ls

