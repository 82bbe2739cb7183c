"""fig_spectra (eigenvalues in the complex plane) and fig_gap (spectral gap and ratio against depth)."""

from __future__ import annotations

import matplotlib.ticker
import pandas as pd
from matplotlib.lines import Line2D

from powerlens.analysis.spectra import leading_type
from powerlens.outputs.figures.style import DISTINCT, LINESTYLES, MARKERS
from powerlens.outputs.plotting import grid, legend_below, panel_title, plt, save, style, unique_handles


def fig_spectra(models: list[dict], stem, dpi: int):
    """Eigenvalues of F in the complex plane, one panel per model.

    ``models``: dicts with ``label``, ``weights`` (label), ``eigvals`` (U, d) and ``shared`` (bool).
    Shared-weight models (ALBERT) have one matrix; layer-varying models colour eigenvalues by layer.
    The leading eigenvalue (or conjugate pair) of each layer is ringed.
    """
    style()
    fig, axes = grid(len(models), ncols=4, size=3.3)
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
            cb.set_label("layer t", fontsize=7)
            cb.locator = matplotlib.ticker.MaxNLocator(integer=True)
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
        ax.set_title(panel_title(m["label"], m["weights"]) + ("\none F shared by all layers" if m["shared"] else
                                                               f"\n{U} layers"), fontsize=8.5)
        ax.set_xlabel(r"Re $\lambda$")
        ax.set_ylabel(r"Im $\lambda$")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(4))
    fig.suptitle(r"Eigenvalues of the layer matrices $F_t = W_O W_V$ in the complex plane (axes scaled "
                 "to each model's spectrum)", y=1.0)
    fig.tight_layout(w_pad=2.0)
    legend_below(fig, *unique_handles(axes), ncol=3)
    return save(fig, stem, dpi)


def fig_gap(df: pd.DataFrame, labels: dict[str, str], weights: dict[str, str], stem, dpi: int):
    """Per layer and model: the relative gap beyond the lead's pair, 1 - |l_next|/|l1| (what sets the
    power-method rate; a complex pair's partner is not "next"), and |l1| (the scale); filled markers for a
    real leading eigenvalue, open ones for a complex pair."""
    style()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10.5, 3.8))
    for i, (m, g) in enumerate(df.groupby("model", sort=False)):
        name = panel_title(labels.get(m, m), weights[m])
        c, mk = DISTINCT[i % len(DISTINCT)], MARKERS[i % len(MARKERS)]
        pair = (g["leading_type"] == "complex pair").to_numpy()
        rel = 1 - g["ratio_next"].to_numpy()
        for ax, y in ((a1, rel), (a2, g["abs_lambda1"].to_numpy())):
            ax.plot(g["layer"], y, lw=1.2, color=c, label=name, ls=LINESTYLES[i % len(LINESTYLES)])
            ax.scatter(g["layer"][~pair], y[~pair], s=22, color=c, marker=mk, zorder=3)
            ax.scatter(g["layer"][pair], y[pair], s=22, facecolors="white", edgecolors=c, marker=mk, zorder=3)
    for ax in (a1, a2):
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_xlabel("layer t")
        ax.set_yscale("log")
    a1.set_ylabel(r"$1 - |\lambda_{next}| / |\lambda_1|$")
    a1.set_title("relative gap beyond the leading eigenvalue's pair\n(larger: faster power-method alignment)")
    a2.set_ylabel(r"$|\lambda_1|$")
    a2.set_title(r"leading eigenvalue's modulus $|\lambda_1(F_t)|$")
    fig.tight_layout()
    hs, ls = unique_handles([a1])

    hs += [Line2D([], [], ls="", marker="o", color="0.3"), Line2D([], [], ls="", marker="o", mfc="white", color="0.3")]
    ls += ["filled: real leading eigenvalue", "open: complex leading pair"]
    legend_below(fig, hs, ls, ncol=3)
    return save(fig, stem, dpi)

