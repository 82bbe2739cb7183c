"""fig_spectra (eigenvalues in the complex plane) and fig_gap (spectral gap and ratio against depth)."""

from __future__ import annotations

import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from powerlens.analysis.spectra import leading_type
from powerlens.outputs.figures.style import DISTINCT, LINESTYLES, MARKERS
from powerlens.outputs.plotting import (
    WIDTH,
    grid,
    legend_below,
    panel_title,
    plt,
    save,
    style,
    unique_handles,
    wrap_title,
)


def fig_spectra(models: list[dict], stem, dpi: int):
    """Eigenvalues of F in the complex plane, one panel per model.

    ``models``: dicts with ``label``, ``weights`` (label), ``eigvals`` (U, d) and ``shared`` (bool).
    Shared-weight models (ALBERT) have one matrix; layer-varying models colour eigenvalues by layer.
    The leading eigenvalue (or conjugate pair) of each layer is ringed.
    """
    style()
    fig, axes = grid(len(models), ncols=3, size=2.3)
    for ax, m in zip(axes, models):
        ev = m["eigvals"]
        U = ev.shape[0]
        if U == 1:
            ax.scatter(ev[0].real, ev[0].imag, s=4, color="C0", alpha=0.6, lw=0, label="eigenvalue (one shared F)")
        else:
            cmap = plt.get_cmap("viridis")
            for u in range(U):
                ax.scatter(ev[u].real, ev[u].imag, s=3, color=cmap(u / max(U - 1, 1)), alpha=0.5, lw=0,
                           label="eigenvalue (colour: layer t)" if u == U // 2 else None)
            sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, U - 1))
            cb = fig.colorbar(sm, ax=ax, fraction=0.046, pad=0.02)
            cb.set_label("layer t", fontsize=8)
            cb.locator = matplotlib.ticker.MaxNLocator(nbins=4 if len(models) <= 3 else 3, integer=True)
            cb.update_ticks()
        for u in range(U):
            pts = ev[u, :2] if leading_type(ev[u, 0]) == "complex pair" else ev[u, :1]
            ax.scatter(pts.real, pts.imag, s=16, facecolors="none", edgecolors="C3", lw=0.7, alpha=0.8,
                       label="leading eigenvalue (or conjugate pair) of a layer" if u == 0 else None)
        ax.axhline(0, color="0.6", lw=0.5)
        ax.axvline(0, color="0.6", lw=0.5)
        # each axis fits its own data (an equal aspect squeezed wide spectra into a thin strip)
        re, im = ev.real.ravel(), ev.imag.ravel()
        for lim, v in ((ax.set_xlim, re), (ax.set_ylim, im)):
            lo, hi = float(v.min()), float(v.max())
            pad = 0.06 * max(hi - lo, 1e-12)
            lim(lo - pad, hi + pad)
        ax.set_title(wrap_title(panel_title(m["label"], m["weights"])) + ("\nshared F" if m["shared"] else
                                                                           f"\n{U} layers"))
        ax.set_xlabel(r"Re $\lambda$")
        ax.set_ylabel(r"Im $\lambda$")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(4))
    hs, ls = unique_handles(axes)
    legend_below(fig, hs, [lab.replace(" of a layer", "") for lab in ls], ncol=2)
    return save(fig, stem, dpi)


def fig_gap(df: pd.DataFrame, labels: dict[str, str], weights: dict[str, str], stem, dpi: int):
    """Per layer and model: the relative gap beyond the lead's pair, 1 - |l_next|/|l1| (what sets the
    power-method rate; a complex pair's partner is not "next"), and |l1| (the scale); filled markers for a
    real leading eigenvalue, open ones for a complex pair. Colour: the model (a matched control: its trained
    model's colour); line style and marker: the control's seed (:func:`seed_of`), so that no legend needs more
    than 6 entries."""
    style()
    n = df["model"].nunique()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(WIDTH, 3.2 if n <= 3 else 4.0))
    key = {m: seed_of(labels.get(m, m)) for m in df["model"].unique()}
    bases = list(dict.fromkeys(b for b, _ in key.values()))
    seeds = list(dict.fromkeys(x for _, x in key.values()))
    for m, g in df.groupby("model", sort=False):
        i, k = bases.index(key[m][0]), seeds.index(key[m][1])
        k = i if seeds == [""] else k  # no seeds: each model its own line style and marker too
        c, mk, ls = DISTINCT[i % len(DISTINCT)], MARKERS[k % len(MARKERS)], LINESTYLES[k % len(LINESTYLES)]
        pair = (g["leading_type"] == "complex pair").to_numpy()
        rel = 1 - g["ratio_next"].to_numpy()
        for ax, y in ((a1, rel), (a2, g["abs_lambda1"].to_numpy())):
            ax.plot(g["layer"], y, lw=1.2, color=c, ls=ls)
            ax.scatter(g["layer"][~pair], y[~pair], s=22, color=c, marker=mk, zorder=3)
            ax.scatter(g["layer"][pair], y[pair], s=22, facecolors="white", edgecolors=c, marker=mk, zorder=3)
    for ax in (a1, a2):
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_xlabel("layer t")
        ax.set_yscale("log")
    a1.set_ylabel(r"$1 - |\lambda_{next}| / |\lambda_1|$")
    a1.set_title("relative gap beyond the lead's pair\n(larger: faster power-method alignment)")
    a2.set_ylabel(r"$|\lambda_1|$")
    a2.set_title(r"leading eigenvalue's modulus $|\lambda_1(F_t)|$")
    names = [wrap_title(panel_title(b, "" if seeds != [""] else weights.get(_model_of(df, labels, b), "")), 34)
             for b in bases]
    hs = [Line2D([], [], color=DISTINCT[i % len(DISTINCT)], lw=1.4,
                 **({"ls": LINESTYLES[i % len(LINESTYLES)]} if seeds == [""] else {})) for i in range(len(bases))]
    for j in range(0, min(len(hs), 12), 6):  # 6 models a legend: below the panels, then above them
        legend_below(fig, hs[j:j + 6], names[j:j + 6], ncol=3 if n <= 3 else 2, loc="lower center" if j == 0
                     else "upper center")
    if len(hs) > 12:  # more than 12 models (the paper run's twins): the rest in the left panel's corner
        a1.add_artist(a1.legend(hs[12:18], names[12:18], loc="best", fontsize=8, framealpha=0.85))
    # what a marker's fill (and, for matched controls, a line style) means: in the right panel's corner
    key = [Line2D([], [], ls="", marker="o", color="0.3"), Line2D([], [], ls="", marker="o", mfc="white", color="0.3")]
    words = ["real lead", "complex pair"]
    if seeds != [""]:
        key += [Line2D([], [], color="0.3", lw=1.2, ls=LINESTYLES[k % len(LINESTYLES)],
                       marker=MARKERS[k % len(MARKERS)], ms=4) for k in range(len(seeds))][:4]
        words += [s or "trained" for s in seeds][:4]
    a2.legend(key, words, loc="best", fontsize=8, framealpha=0.85)
    return save(fig, stem, dpi)


def seed_of(label: str) -> tuple[str, str]:
    """A matched control's label split into its trained model's and its seed ("X matched control (seed 1)" ->
    ("X matched control", "seed 1")); any other label is its own model with no seed."""
    import re

    m = re.match(r"^(.*) \((seed \d+)\)$", str(label))
    return (m.group(1), m.group(2)) if m else (str(label), "")


def _model_of(df: pd.DataFrame, labels: dict, base: str) -> str:
    """The model key whose label is ``base`` (for its weights' precision in the legend)."""
    return next((m for m in df["model"].unique() if labels.get(m, m) == base), base)


def gamma_gap_points(dyn: pd.DataFrame, spec: pd.DataFrame) -> pd.DataFrame:
    """The points claim C8 correlates (:func:`powerlens.analysis.claims.layer_criteria.c8`), for one model:
    its real forward pass's layers of its own depth, x = 1 - |lambda_next| / |lambda_1| of F_t (the spectra
    table's ``ratio_next``), y = gamma_t minus the Monte Carlo null's median."""
    from powerlens.analysis.verdict_tests import GAMMA, Field, own_depth

    d = own_depth(dyn[dyn["mode"] == "model"]).merge(spec[["layer", "ratio_next"]], on="layer")
    return pd.DataFrame({"layer": d["layer"], "gap": 1 - d["ratio_next"],
                         "margin": d[GAMMA.value] - d[GAMMA.col(Field.NULL_MEDIAN)]})


def fig_gamma_gap(pairs: list[dict], stem, dpi: int):
    """Claim C8 as a scatter, one panel per model: gamma_t's margin over its null median (y) against the relative
    gap beyond the lead's pair (x), one point per layer of the real forward pass, the model's matched control in
    grey beside it; the panel title gives Spearman's rho of the model's points.

    ``pairs``: dicts with ``label``, ``weights``, ``points`` (:func:`gamma_gap_points`) and optional
    ``control`` (the matched control's points)."""
    from scipy.stats import spearmanr

    from powerlens.core.fmt import fmt_num

    style()
    fig, axes = grid(len(pairs), ncols=3, size=2.1, extra=0.6)
    for i, (ax, p) in enumerate(zip(axes, pairs)):
        c, mk = DISTINCT[i % len(DISTINCT)], MARKERS[i % len(MARKERS)]
        ctl = p.get("control")
        if ctl is not None and len(ctl):
            ax.scatter(ctl["gap"], ctl["margin"], s=14, color="0.65", marker=mk, lw=0, zorder=2)
        pts = p["points"]
        ax.scatter(pts["gap"], pts["margin"], s=20, color=c, marker=mk, zorder=3)
        ax.axhline(0, color="0.3", lw=0.8, ls=":")
        ok = len(pts) >= 3 and np.ptp(pts["gap"]) > 0 and np.ptp(pts["margin"]) > 0
        rho = f"Spearman {fmt_num(spearmanr(pts['gap'], pts['margin']).statistic)}" if ok else "Spearman: -"
        ax.set_title(wrap_title(panel_title(p["label"], p["weights"])) + f"\n{rho}")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(r"gap $1 - |\lambda_{next}|/|\lambda_1|$")
    axes[0].set_ylabel(r"$\gamma_t$ - null median")
    hs = [Line2D([], [], ls="", marker="o", color="0.3"), Line2D([], [], ls="", marker="o", color="0.65")]
    legend_below(fig, hs, ["trained model: one point per layer", "its matched control (random attention weights)"],
                 ncol=2)
    return save(fig, stem, dpi)
