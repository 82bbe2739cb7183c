"""The paper's figures, drawn from the pipeline's tables and arrays (never from anything else)."""

from __future__ import annotations

import matplotlib.ticker
import numpy as np
import pandas as pd

from .plotting import grid, panel_title, plt, save, style
from .spectra import leading_type


def fig_spectra(models: list[dict], stem, dpi: int = 150):
    """Eigenvalues of F in the complex plane, one panel per model.

    ``models``: dicts with ``label``, ``weights`` (label), ``eigvals`` (U, d) and ``shared`` (bool).
    Shared-weight models (ALBERT) have one matrix; layer-varying models colour eigenvalues by layer.
    The leading eigenvalue (or conjugate pair) of each layer is ringed.
    """
    style()
    fig, axes = grid(len(models), ncols=4, size=2.8)
    for ax, m in zip(axes, models):
        ev = m["eigvals"]
        U = ev.shape[0]
        if U == 1:
            ax.scatter(ev[0].real, ev[0].imag, s=4, color="C0", alpha=0.6, lw=0, label="eigenvalues")
        else:
            cmap = plt.get_cmap("viridis")
            for u in range(U):
                ax.scatter(ev[u].real, ev[u].imag, s=3, color=cmap(u / max(U - 1, 1)), alpha=0.5, lw=0)
            sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, U - 1))
            cb = fig.colorbar(sm, ax=ax, fraction=0.046, pad=0.02)
            cb.set_label("layer t", fontsize=7)
            cb.locator = matplotlib.ticker.MaxNLocator(integer=True)
            cb.update_ticks()
        for u in range(U):
            pts = ev[u, :2] if leading_type(ev[u, 0]) == "complex pair" else ev[u, :1]
            ax.scatter(pts.real, pts.imag, s=28, facecolors="none", edgecolors="C3", lw=0.8,
                       label="leading" if u == 0 else None)
        ax.axhline(0, color="0.6", lw=0.5)
        ax.axvline(0, color="0.6", lw=0.5)
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_title(panel_title(m["label"], m["weights"]) + (" - shared F" if m["shared"] else ""))
        ax.set_xlabel(r"Re $\lambda$ (dimensionless)")
        ax.set_ylabel(r"Im $\lambda$ (dimensionless)")
        ax.legend(loc="upper left", fontsize=6, frameon=True)
    fig.suptitle(r"Spectra of the layer matrices $F_t = O_t V_t$", y=1.0)
    fig.tight_layout()
    return save(fig, stem, dpi)


def fig_gap(df: pd.DataFrame, labels: dict[str, str], weights: dict[str, str], stem, dpi: int = 150):
    """Spectral gap |l1| - |l2| and power-method ratio |l2|/|l1| vs layer, one line per model."""
    style()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
    for i, (m, g) in enumerate(df.groupby("model", sort=False)):
        name = panel_title(labels.get(m, m), weights[m])
        a1.plot(g["layer"], g["gap"], marker="o", ms=3, lw=1, color=f"C{i % 10}", label=name)
        a2.plot(g["layer"], g["ratio_next"], marker="o", ms=3, lw=1, color=f"C{i % 10}", label=name)
    for ax in (a1, a2):
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    a1.set_xlabel("layer t")
    a1.set_ylabel(r"$|\lambda_1| - |\lambda_2|$ (dimensionless)")
    a1.set_title("spectral gap of $F_t$ (0 for a complex leading pair)")
    a2.set_xlabel("layer t")
    a2.set_ylabel(r"$|\lambda_{next}| / |\lambda_1|$ (power-method rate)")
    a2.set_title("ratio to the first eigenvalue beyond the lead's pair")
    a2.axhline(1, color="0.5", lw=0.6, ls="--")
    a2.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    return save(fig, stem, dpi)


def _name(labels, weights, m):
    return panel_title(labels.get(m, m), weights.get(m, ""))


def fig_gamma(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int = 150):
    """gamma_t vs layer for every layer-varying model, both modes, with the null models as a band."""
    style()
    models = [m for m in df["model"].unique() if not df[df["model"] == m]["shared"].iloc[0]]
    if not models:
        models = list(df["model"].unique())
    fig, axes = grid(len(models), ncols=3, size=3.2)
    for ax, m in zip(axes, models):
        for i, (mode, g) in enumerate(df[df["model"] == m].groupby("mode", sort=True)):
            ls = "-" if mode == "model" else "--"
            g = g[g["gamma_null_q95"].notna()]  # the model's own depth
            ax.plot(g["layer"], g["gamma"], ls=ls, marker="o", ms=3, color=f"C{i}", label=f"{mode}: leading")
            ax.fill_between(g["layer"], g["gamma_null_median"], g["gamma_null_q95"], color=f"C{i}", alpha=0.18,
                            lw=0, label=f"{mode}: null median-q95")
        ax.set_title(_name(labels, weights, m))
        ax.set_xlabel("layer t")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_ylabel(r"$\gamma_t$ = mean $|\cos(x_i(t+1), v_{1,t})|$")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=6)
    fig.suptitle("Alignment of each layer's output with its own leading eigenvector (band: median to 95th "
                 "percentile of 2000+ random subspaces of the lead's dimension)", y=1.0, fontsize=9)
    fig.tight_layout()
    return save(fig, stem, dpi)


def fig_rho(df: pd.DataFrame, labels: dict, weights: dict, stem, alpha: float = 0.05, dpi: int = 150):
    """rho_t vs layer (fraction of tokens whose alignment increases), 0.5 line, Holm-significant filled."""
    style()
    models = list(df["model"].unique())
    fig, axes = grid(len(models), ncols=3, size=3.2)
    for ax, m in zip(axes, models):
        for i, (mode, g) in enumerate(df[df["model"] == m].groupby("mode", sort=True)):
            g = g[g["rho_p_holm"].notna()]  # the model's own depth (long shared-weight runs: its first L steps)
            sig = g["rho_p_holm"] < alpha
            ax.fill_between(g["layer"], g["rho_null_median"], g["rho_null_q95"], color=f"C{i}", alpha=0.15, lw=0)
            ax.plot(g["layer"], g["rho"], color=f"C{i}", lw=1, ls="-" if mode == "model" else "--")
            ax.scatter(g["layer"][sig], g["rho"][sig], color=f"C{i}", s=14, label=f"{mode}: p_Holm < {alpha}")
            ax.scatter(g["layer"][~sig], g["rho"][~sig], facecolors="none", edgecolors=f"C{i}", s=14,
                       label=f"{mode}: not significant")
        ax.axhline(0.5, color="0.3", lw=0.8, ls=":")
        ax.set_ylim(0, 1)
        ax.set_title(_name(labels, weights, m))
        ax.set_xlabel("layer t")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_ylabel(r"$\rho_t$ = P(alignment with $v_{1,t}$ increases)")
        ax.legend(fontsize=5.5)
    fig.suptitle("Fraction of tokens tilted towards the layer's leading eigenvector (filled: Monte Carlo p "
                 "against random subspaces, Holm across layers; band: null median to 95th percentile)", y=1.0,
                 fontsize=9)
    fig.tight_layout()
    return save(fig, stem, dpi)


def fig_albert_consensus(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int = 150):
    """Shared-weight models: alignment with v_1, with span(v_1, v_2), and mean pairwise cosine vs step."""
    style()
    models = [m for m in df["model"].unique() if df[df["model"] == m]["shared"].iloc[0]]
    fig, axes = grid(max(len(models), 1), ncols=4, size=3.2)
    if not models:
        axes[0].text(0.5, 0.5, "no shared-weight model in this run", ha="center", va="center")
        axes[0].set_axis_off()
    for ax, m in zip(axes, models):
        for i, (mode, g) in enumerate(df[df["model"] == m].groupby("mode", sort=True)):
            ls = "-" if mode == "attention-only" else ":"
            ax.plot(g["layer"] + 1, g["gamma"], ls=ls, color="C0", label=f"{mode}: |cos(x, v1)|")
            ax.plot(g["layer"] + 1, g["span_M_alignment"], ls=ls, color="C1",
                    label=f"{mode}: span(v1, v2) of I+F")
            ax.plot(g["layer"] + 1, g["pairwise_abs_cos"], ls=ls, color="C2", label=f"{mode}: pairwise |cos|")
        ax.set_xscale("log")
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(_name(labels, weights, m))
        ax.set_xlabel("step t (layer applications)")
        ax.set_ylabel("alignment / cosine (dimensionless)")
        ax.legend(fontsize=5.5)
    fig.suptitle("Shared weights: consensus (pairwise cosine to 1) and alignment with the leading "
                 "eigenvectors", y=1.0, fontsize=9)
    fig.tight_layout()
    return save(fig, stem, dpi)


def fig_albert_rotation(runs: list[dict], stem, dpi: int = 150):
    """Token trajectories of shared-weight models projected on the leading plane (attention-only runs).

    ``runs``: dicts with label, weights, trajectory (steps+1, n, 2), leading_type, arg_mu1, mean_dtheta."""
    style()
    fig, axes = grid(max(len(runs), 1), ncols=4, size=3.2)
    if not runs:
        axes[0].text(0.5, 0.5, "no shared-weight model in this run", ha="center", va="center")
        axes[0].set_axis_off()
    for ax, r in zip(axes, runs):
        tr = r["trajectory"]
        cmap = plt.get_cmap("viridis")
        for j in range(tr.shape[1]):
            ax.plot(tr[:, j, 0], tr[:, j, 1], lw=0.6, color=cmap(j / max(tr.shape[1] - 1, 1)), alpha=0.8)
            ax.scatter(tr[-1, j, 0], tr[-1, j, 1], s=8, color="C3", zorder=3)
        th = np.linspace(0, 2 * np.pi, 200)
        ax.plot(np.cos(th), np.sin(th), color="0.7", lw=0.5)
        ax.set_aspect("equal")
        plane = r["rotation_plane"]
        ax.set_title(f"{panel_title(r['label'], r['weights'])}\nF lead: {r['leading_type']}; "
                     f"arg mu1 = {r['arg_mu1']:.3f}, mean dtheta = {r['mean_dtheta']:.3f} rad", fontsize=7)
        ax.set_xlabel(f"coordinate 1 in {plane}")
        ax.set_ylabel("coordinate 2")
    fig.suptitle("Token trajectories (unit vectors) projected on the leading plane; red: final step",
                 y=1.0, fontsize=9)
    fig.tight_layout()
    return save(fig, stem, dpi)


def fig_theory(real: dict, cplx: dict, bip: dict, pred: dict, stem, dpi: int = 150):
    """Three panels: (a) convergence to +-v1 vs the power-method rate, (b) plane distance and rotation
    angle vs arg(mu1), (c) fraction of perturbed bipartite states that have left, per head count."""
    style()
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(12, 3.6))
    for i, att in enumerate(("full", "softmax")):
        e = real[f"err_{att}"]
        a.semilogy(np.arange(len(e)), np.maximum(e, 1e-17), color=f"C{i}", label=f"{att} attention")
    t = np.arange(25)
    a.semilogy(t, 0.5 * pred["rate"] ** t, "k--", lw=0.8, label=r"slope $|\mu_2/\mu_1|$")
    a.set_xlim(0, 60)
    a.set_xlabel("step t")
    a.set_ylabel(r"max distance to line $\pm v_1$ (sin angle)")
    a.set_title("(a) real dominant: consensus on $\\pm v_1$")
    a.legend(fontsize=6)
    for i, att in enumerate(("full", "softmax")):
        dist = cplx[f"dist_{att}"]
        b.semilogy(np.arange(len(dist)), np.maximum(dist, 1e-17), color=f"C{i}", label=f"{att}: plane distance")
    b.set_xlabel("step t")
    b.set_ylabel("max distance to span(Re v1, Im v1)")
    b2 = b.twinx()
    for i, att in enumerate(("full", "softmax")):
        b2.plot(np.arange(1, len(cplx[f"dtheta_{att}"]) + 1), cplx[f"dtheta_{att}"], color=f"C{i}", ls=":", lw=1,
                label=f"{att}: angle per step")
    b2.axhline(pred["angle"], color="k", ls="--", lw=0.8, label=r"arg $\mu_1$")
    b2.set_ylabel("angle advanced per step (rad)")
    b.set_title("(b) complex pair: closed orbit in the plane")
    lines = b.get_legend_handles_labels()
    lines2 = b2.get_legend_handles_labels()
    b.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=6, loc="center right")
    for i, (k, v) in enumerate(sorted(bip.items())):
        c.plot(np.arange(len(v)), v, color=f"C{i}", label=k.replace("broken_", "").replace("-H", ", heads = "))
    c.set_ylim(-0.05, 1.05)
    c.set_xlabel("step t")
    c.set_ylabel("fraction of perturbed runs broken")
    c.set_title("(c) bipartite equilibrium, perturbed by epsilon")
    c.legend(fontsize=6)
    fig.suptitle("Theory checks on synthetic layers with prescribed spectra (no checkpoint involved)", y=1.02,
                 fontsize=9)
    fig.tight_layout()
    return save(fig, stem, dpi)


def fig_steering(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int = 150):
    """Top: mean |cos| with u after the edited last layer vs kappa, per model (rank-1 and baseline, both
    modes). Bottom: probability of the target token vs kappa, with the activation-addition baseline."""
    style()
    models = list(df["model"].unique())
    fig, axes = plt.subplots(2, len(models), figsize=(3.2 * len(models), 6.0), squeeze=False)
    for j, m in enumerate(models):
        g = df[(df["model"] == m) & (df["kappa"] >= 0)]
        top, bot = axes[0, j], axes[1, j]
        for i, (tgt, gt) in enumerate(g.groupby("target", sort=False)):
            r1 = gt[gt["method"].str.startswith("rank-1")]
            aa = gt[gt["method"].str.startswith("activation")]
            r1, aa = r1[r1["kappa"] > 0], aa[aa["kappa"] > 0]
            x1 = r1["change_norm_model"]
            top.plot(x1, r1["cos_after_layer_model"], "-o", ms=3, color=f"C{i}", label=f"{tgt}: rank-1, model")
            top.plot(r1["change_norm_attention_only"], r1["cos_after_layer_attention_only"], "--", color=f"C{i}",
                     label=f"{tgt}: rank-1, attn-only")
            top.plot(aa["change_norm_model"], aa["cos_after_layer_model"], ":s", ms=3, color=f"C{i}",
                     label=f"{tgt}: act. addition")
            if r1["p_target"].notna().any():
                bot.plot(x1, r1["p_target"], "-o", ms=3, color=f"C{i}", label=f"{tgt}: rank-1")
                bot.plot(x1, aa["p_target"], ":", color=f"C{i}", label=f"{tgt}: act. addition")
        for ax in (top, bot):
            ax.set_xscale("log")
            ax.set_xlabel("norm of the change at the site")
        top.set_ylim(0, 1.02)
        top.set_ylabel(r"mean $|\cos(x_i, u)|$ after last layer")
        top.set_title(_name(labels, weights, m))
        top.legend(fontsize=5)
        if not g["p_target"].notna().any():
            bot.text(0.5, 0.5, "no LM head:\nvector alignment only", ha="center", va="center",
                     transform=bot.transAxes)
        else:
            bot.legend(fontsize=5)
        bot.set_ylabel("mean P(target token)")
    fig.suptitle("Steering by a rank-1 change of the last layer's output matrix vs activation addition at the "
                 "same site (the output projection), over the mean norm of the change there: "
                 r"$\alpha |z^T h|$ for the edit, $\beta$ for the baseline (one point per $\kappa > 0$)", y=1.0,
                 fontsize=9)
    fig.tight_layout()
    return save(fig, stem, dpi)
