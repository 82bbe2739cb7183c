"""The paper's figures, drawn from the pipeline's tables and arrays (never from anything else)."""

from __future__ import annotations

import matplotlib.ticker
import numpy as np
import pandas as pd

from powerlens.outputs.plotting import draw_split, grid, legend_below, panel_title, placeholder, plt, save, style, unique_handles
from powerlens.analysis.spectra import leading_type


# Okabe-Ito colours (distinguishable by every reader), each model also with its own marker and line style
DISTINCT = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]
MARKERS = ["o", "s", "D", "^", "v", "P", "X"]
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 1))]


def fig_spectra(models: list[dict], stem, dpi: int = 150):
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


def fig_gap(df: pd.DataFrame, labels: dict[str, str], weights: dict[str, str], stem, dpi: int = 150):
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
    from matplotlib.lines import Line2D

    hs += [Line2D([], [], ls="", marker="o", color="0.3"), Line2D([], [], ls="", marker="o", mfc="white", color="0.3")]
    ls += ["filled: real leading eigenvalue", "open: complex leading pair"]
    legend_below(fig, hs, ls, ncol=3)
    return save(fig, stem, dpi)


def _name(labels, weights, m):
    return panel_title(labels.get(m, m), weights.get(m, ""))


def _depth_note(ax, g_all, g_shown):
    """Say so when a long shared-weight run is shown over the model's own depth only."""
    if len(g_all) > len(g_shown):
        ax.text(0.98, 0.02, f"attention-only: steps 0-{int(g_shown['layer'].max())} of {len(g_all)} "
                "(the model's depth;\nthe long run is in fig_albert_consensus)", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=6.5, color="0.35")


def _marks(ax, g, stat: str, above: float, alpha: float, color: str, mode: str) -> None:
    """Filled: significant as the claims count it (above the bound, Monte Carlo p after Holm < alpha, not
    saturated); open: not significant; cross: saturated (half or more of the null's draws tie)."""
    sat = (g[f"{stat}_saturated"].fillna(False).astype(bool) if f"{stat}_saturated" in g
           else pd.Series(False, index=g.index))
    sig = (g[f"{stat}_p_holm"] < alpha) & (g[stat] > above) & ~sat
    ax.scatter(g["layer"][sig], g[stat][sig], color=color, s=16, zorder=3,
               label=f"{mode}: significant (MC p, Holm, < {alpha})")
    ax.scatter(g["layer"][~sig & ~sat], g[stat][~sig & ~sat], facecolors="white", edgecolors=color, s=16, zorder=3,
               label=f"{mode}: not significant")
    if sat.any():
        ax.scatter(g["layer"][sat], g[stat][sat], color=color, marker="x", s=20, zorder=3,
                   label=f"{mode}: saturated (half or more of the draws tie)")


def fig_gamma(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int = 150, alpha: float = 0.05):
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


def fig_rho(df: pd.DataFrame, labels: dict, weights: dict, stem, alpha: float = 0.05, dpi: int = 150):
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
        ax.set_ylim(0, 1.02)
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
    from pathlib import Path

    from powerlens.outputs.plotting import TRAINED, TWIN_SUFFIX

    if TRAINED["model"] == "twins":
        return "no random-weight twin of a shared-weight (ALBERT) model in this run"
    return ("no shared-weight (ALBERT) model with trained weights in this run\n(random-weight twins: "
            f"{Path(stem).name}{TWIN_SUFFIX})")


def fig_albert_consensus(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int = 150):
    """Shared-weight models: alignment with v_1, with the leading subspace of I + F, and mean pairwise |cos|
    vs step, in both modes (colour: quantity; line style: mode)."""
    from matplotlib.lines import Line2D

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


def fig_albert_rotation(runs: list[dict], stem, dpi: int = 150):
    """Token trajectories of shared-weight models projected on the leading plane (attention-only runs), axes
    fitted to the data, with the rotation per step predicted and measured side by side (no pre-registered
    criterion: reported, not judged).

    ``runs``: dicts with label, weights, trajectory (steps+1, n, 2), leading_type, arg_mu1, mean_dtheta,
    rotation_plane."""
    from matplotlib.lines import Line2D

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


def fig_theory(real: dict, cplx: dict, bip: dict, pred: dict, stem, dpi: int = 150):
    """Four panels: (a) convergence to +-v1 vs the power-method rate, (b) distance to the plane of a complex
    leading pair, (c) the angle advanced per step vs arg(mu1), (d) the C4 sweep: fraction of perturbed
    bipartite equilibria that broke vs attention sharpness, per head count and size, with the positive
    control. "full" attention: every attention weight equal (the setting of the theory); "softmax": random
    W_Q, W_K (how far a real attention moves the prediction)."""
    from matplotlib.lines import Line2D

    style()
    fig, (a, b, bb, c) = plt.subplots(1, 4, figsize=(17, 4.1))
    for i, att in enumerate(("full", "softmax")):
        e = real[f"err_{att}"]
        a.semilogy(np.arange(len(e)), np.maximum(e, 1e-17), color=f"C{i}", lw=1.4, label=f"{att} attention")
    t = np.arange(25)
    a.semilogy(t, 0.5 * pred["rate"] ** t, "k--", lw=0.8, label=r"predicted slope $|\mu_2/\mu_1|^t$")
    a.set_xlim(0, 60)
    a.set_xlabel("step t")
    a.set_ylabel(r"max distance to the line $\pm v_1$ (sin angle)")
    a.set_title("(a) real leading eigenvalue:\nconsensus on $\\pm v_1$")
    a.legend(loc="upper right", fontsize=7)
    # the angle is a rotation once the tokens are on the plane: draw it from the step the full-attention run
    # is within 1e-6 of the plane (the steps before are the transient onto it)
    on = np.flatnonzero(np.asarray(cplx["dist_full"]) < 1e-6)
    skip = int(on[0]) if len(on) else 5
    tails = []
    for i, att in enumerate(("full", "softmax")):
        dist = cplx[f"dist_{att}"]
        b.semilogy(np.arange(len(dist)), np.maximum(dist, 1e-17), color=f"C{i}", lw=1.4, label=f"{att} attention")
        d = np.asarray(cplx[f"dtheta_{att}"])
        steps = np.arange(1, len(d) + 1)
        bb.plot(steps[skip:], d[skip:], color=f"C{i}", lw=1.6 - 0.6 * i, ls="-" if i == 0 else "--",
                label=f"{att} attention: mean {np.mean(d[skip:]):.5f} rad")
        tails.append(d[skip:])
    bb.axhline(pred["angle"], color="0.3", ls=":", lw=1.2, label=rf"predicted: arg $\mu_1$ = {pred['angle']:.5f} rad")
    dev = max(float(np.max(np.abs(np.concatenate(tails) - pred["angle"]))), 1e-4)
    bb.set_ylim(pred["angle"] - 3 * dev, pred["angle"] + 3 * dev)
    b.set_xlabel("step t")
    b.set_ylabel(r"max distance to span(Re $v_1$, Im $v_1$)")
    b.set_title("(b) complex leading pair:\ntokens reach the plane")
    b.legend(loc="upper right", fontsize=7)
    bb.set_xlabel(f"step t (from step {skip}: on the plane to 1e-6)")
    bb.set_ylabel("angle advanced per step (rad)")
    bb.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter(useOffset=False))
    bb.set_title("(c) complex leading pair:\nrotation per step in the plane")
    bb.legend(loc="lower right", fontsize=7)
    rate, sharp = np.asarray(bip["sweep_rate"], dtype=float), np.asarray(bip["sweep_sharpness"], dtype=float)
    heads, sizes = [int(h) for h in bip["sweep_heads"]], [int(x) for x in bip["sweep_sizes"]]
    styles = ["-", "--", ":", "-."]
    n_in = int(np.isfinite(rate).sum())
    n_broke = int(np.nansum(rate > 0))
    for si, d_ in enumerate(sizes):
        for hi, H in enumerate(heads):
            x = sharp * 1.06 ** (hi - (len(heads) - 1) / 2)  # a small offset per head count: no point hides another
            c.plot(x, rate[si, hi], color=f"C{hi}", ls=styles[si % 4], marker="osD^v<>"[hi % 7], ms=4)
    pc = float(bip["positive_control_rate"])
    c.axhline(pc, color="0.3", lw=0.8, ls=(0, (1, 2)))
    c.text(sharp.min(), pc - 0.04, f"positive control (a known unstable equilibrium): {pc:.0%} of runs broke",
           fontsize=7, va="top")
    c.text(sharp.min(), 0.45, f"{n_in} cells with a stable equilibrium found;\nruns broke in {n_broke} of them\n"
           f"({rate.size - n_in} cells without a fixed point are\nleft out: table_theory lists them)", fontsize=7,
           va="center")
    c.set_xscale("log")
    c.set_ylim(-0.05, 1.05)
    c.set_xlabel("attention sharpness: typical |score| at the bipartite start")
    c.set_ylabel("fraction of perturbed runs that broke")
    c.set_title(f"(d) bipartite equilibrium, perturbed by epsilon = {float(bip['epsilon']):g}:\n"
                "several heads vs one (softmax attention)", fontsize=9)
    hd = [Line2D([], [], color=f"C{hi}", marker="osD^v<>"[hi % 7], ms=4) for hi in range(len(heads))]
    hd += [Line2D([], [], color="0.3", ls=styles[si % 4]) for si in range(len(sizes))]
    c.legend(hd, [f"{H} head{'s' if H > 1 else ''}" for H in heads] + [f"d = {d_}" for d_ in sizes], fontsize=7,
             loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.suptitle("Theory checks on synthetic layers with prescribed spectra (no checkpoint involved). Full "
                 "attention: every attention weight equal (the theory's setting); softmax: random W_Q, W_K",
                 y=1.03, fontsize=9)
    fig.tight_layout()
    return save(fig, stem, dpi)


def fig_steering(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int = 150):
    """One row per model. Left: mean |cos(x_i, u)| after the edited last layer vs the norm of the change the
    residual stream receives (rank-1 edit in both modes, activation addition at matched norm), each rank-1
    point labelled with its kappa. Right: mean probability of the target token, the unsteered model (kappa 0)
    as a grey line. Colour: target; line style: method."""
    from matplotlib.lines import Line2D

    style()
    models = list(df["model"].unique())
    fig, axes = plt.subplots(len(models), 2, figsize=(10, 3.0 * len(models)), squeeze=False)
    targets: list[str] = []
    pu = False
    for j, m in enumerate(models):
        g = df[(df["model"] == m) & (df["kappa"] >= 0)]
        left, right = axes[j]
        name = _name(labels, weights, m)
        has_p = bool(g["p_target"].notna().any())
        for tgt, gt in g.groupby("target", sort=False):
            kind = tgt.split(":")[0]
            if kind not in targets:
                targets.append(kind)
            c = f"C{targets.index(kind)}"
            r1 = gt[gt["method"].str.startswith("rank-1")]
            aa = gt[gt["method"].str.startswith("activation")]
            r0 = r1[r1["kappa"] == 0]
            r1, aa = r1[r1["kappa"] > 0], aa[aa["kappa"] > 0]
            x1 = r1["change_norm_model"]
            left.plot(x1, r1["cos_after_layer_model"], "-o", ms=3.5, color=c)
            for x, y, k in zip(x1, r1["cos_after_layer_model"], r1["kappa"]):
                left.annotate(f"{k:g}", (x, y), textcoords="offset points", xytext=(0, 4), fontsize=6, color=c,
                              ha="center")
            left.plot(r1["change_norm_attention_only"], r1["cos_after_layer_attention_only"], "--", color=c)
            left.plot(aa["change_norm_model"], aa["cos_after_layer_model"], ":s", ms=3, color=c)
            if "cos_pu_after_layer_model" in r1 and r1["cos_pu_after_layer_model"].notna().any():
                pu = True  # a norm follows W_O (Gemma 3): what the residual stream receives points along p * u
                left.plot(x1, r1["cos_pu_after_layer_model"], "-.^", ms=3, color=c)
                cap = float(r1["post_norm_cap"].iloc[0])
                left.axvline(cap, color="0.5", lw=0.8, ls=(0, (1, 3)))
                left.text(cap, 0.95, " cap", fontsize=7, color="0.4", va="top")
            if has_p and r1["p_target"].notna().any():
                right.plot(x1, r1["p_target"], "-o", ms=3.5, color=c)
                for x, y, k in zip(x1, r1["p_target"], r1["kappa"]):
                    right.annotate(f"{k:g}", (x, y), textcoords="offset points", xytext=(0, 4), fontsize=6,
                                   color=c, ha="center")
                right.plot(aa["change_norm_model"], aa["p_target"], ":s", ms=3, color=c)
                if len(r0) and np.isfinite(r0["p_target"].iloc[0]):
                    right.axhline(float(r0["p_target"].iloc[0]), color="0.55", lw=0.9, ls=(0, (4, 2)))
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
            right.text(0.5, 0.5, "no LM head (an encoder): vector alignment only", ha="center", va="center",
                       transform=right.transAxes, fontsize=8)
            right.set_xticks([])
            right.set_yticks([])
            right.set_xlabel("")
            right.grid(False)
    hs = [Line2D([], [], color=f"C{i}", lw=2) for i in range(len(targets))]
    ls = [f"target: {t} (u = {'its row' if t != 'random' else 'a seeded random unit vector'})" for t in targets]
    hs += [Line2D([], [], color="0.3", ls="-", marker="o", ms=3), Line2D([], [], color="0.3", ls="--"),
           Line2D([], [], color="0.3", ls=":", marker="s", ms=3), Line2D([], [], color="0.55", ls=(0, (4, 2)))]
    ls += ["rank-1 change of W_O, real forward pass (numbers: kappa)", "rank-1 change, attention-only law",
           "activation addition, same site and norm of change", "unsteered model (kappa = 0)"]
    if pu:
        hs.append(Line2D([], [], color="0.3", ls="-.", marker="^", ms=3))
        ls.append("rank-1: alignment with p * u (post-attention norm gain p; dotted: its cap)")
    fig.suptitle("Steering by a rank-1 change of the last layer's output matrix vs activation addition at the same "
                 "site, over the norm of the change there (one point per kappa > 0)", y=1.0, fontsize=9)
    fig.tight_layout()
    legend_below(fig, hs, ls, ncol=2)
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


def dynamics_figures(csvs: list, npzs: list, metas: list, labels: dict, *, alpha: float, dpi: int,
                     stems: dict) -> pd.DataFrame:
    """fig_gamma, fig_rho, fig_albert_consensus, fig_albert_rotation and table_alignment from the dynamics
    step's CSVs and arrays and each model's weights.json; ``stems`` maps each output's name to its path
    without suffix. Returns the alignment table."""
    from powerlens.core.io import read_json
    from powerlens.outputs.tables import ALIGNMENT_MISSING, alignment_table, write_table

    shared = {m["model"]: m["shared_weights"] for m in map(read_json, metas)}
    df = pd.concat([pd.read_csv(p) for p in csvs], ignore_index=True)
    df["shared"] = df["model"].map(shared)
    weights = dict(zip(df["model"], df["weights"]))
    draw_split(lambda d, s: fig_gamma(d, labels, weights, s, dpi, alpha), df, weights, stems["fig_gamma"], dpi,
               "fig_gamma")
    draw_split(lambda d, s: fig_rho(d, labels, weights, s, alpha, dpi), df, weights, stems["fig_rho"], dpi, "fig_rho")
    draw_split(lambda d, s: fig_albert_consensus(d, labels, weights, s, dpi), df, weights,
               stems["fig_albert_consensus"], dpi, "fig_albert_consensus")
    draw_split(lambda d, s: fig_albert_rotation(d, s, dpi), rotation_runs(csvs, npzs, shared, labels, weights),
               weights, stems["fig_albert_rotation"], dpi, "fig_albert_rotation")
    t = alignment_table(df, labels, alpha)
    write_table(t, stems["table_alignment"], caption="Alignment of tokens with each layer's leading eigenvector: "
                "gamma vs null models, rho > 0.5 and sign-test significance after Holm correction.",
                missing=ALIGNMENT_MISSING)
    return t
