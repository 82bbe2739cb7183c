"""The paper's figures, drawn from the pipeline's tables and arrays (never from anything else)."""

from __future__ import annotations

import matplotlib.ticker
import numpy as np
import pandas as pd

from .plotting import grid, legend_below, panel_title, plt, save, style, unique_handles
from .spectra import leading_type


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
            ax.scatter(pts.real, pts.imag, s=28, facecolors="none", edgecolors="C3", lw=0.8,
                       label="leading eigenvalue (or conjugate pair) of a layer" if u == 0 else None)
        ax.axhline(0, color="0.6", lw=0.5)
        ax.axvline(0, color="0.6", lw=0.5)
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_title(panel_title(m["label"], m["weights"]) + ("\none F shared by all layers" if m["shared"] else
                                                               f"\n{U} layers"), fontsize=8.5)
        ax.set_xlabel(r"Re $\lambda$")
        ax.set_ylabel(r"Im $\lambda$")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(4))
    fig.suptitle(r"Eigenvalues of the layer matrices $F_t = W_O W_V$ in the complex plane", y=1.0)
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
        c = f"C{i % 10}"
        pair = (g["leading_type"] == "complex pair").to_numpy()
        rel = 1 - g["ratio_next"].to_numpy()
        for ax, y in ((a1, rel), (a2, g["abs_lambda1"].to_numpy())):
            ax.plot(g["layer"], y, lw=1, color=c, label=name)
            ax.scatter(g["layer"][~pair], y[~pair], s=16, color=c, zorder=3)
            ax.scatter(g["layer"][pair], y[pair], s=16, facecolors="white", edgecolors=c, zorder=3)
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
    ls += ["real leading eigenvalue", "complex leading pair"]
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


def fig_gamma(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int = 150):
    """gamma_t vs layer for every layer-varying model, both modes, with the null models as a band."""
    style()
    models = [m for m in df["model"].unique() if not df[df["model"] == m]["shared"].iloc[0]]
    if not models:
        models = list(df["model"].unique())
    fig, axes = grid(len(models), ncols=3, size=3.3)
    for ax, m in zip(axes, models):
        for i, (mode, g) in enumerate(df[df["model"] == m].groupby("mode", sort=True)):
            ls = "-" if mode == "model" else "--"
            g = g[g["gamma_null_q95"].notna()]  # the model's own depth
            ax.plot(g["layer"], g["gamma"], ls=ls, marker="o", ms=3, color=f"C{i}", label=f"{mode}: leading $v_1$")
            ax.fill_between(g["layer"], g["gamma_null_median"], g["gamma_null_q95"], color=f"C{i}", alpha=0.18,
                            lw=0, label=f"{mode}: null, median to 95th percentile")
        ax.set_title(_name(labels, weights, m))
        ax.set_xlabel("layer t")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_ylabel(r"$\gamma_t$ = mean $|\cos(x_i(t+1), v_{1,t})|$")
        ax.set_ylim(bottom=0)
    fig.suptitle("Alignment of each layer's output with its own leading eigenvector, against random subspaces "
                 "of the lead's dimension", y=1.0, fontsize=9)
    fig.tight_layout()
    legend_below(fig, *unique_handles(axes), ncol=2)
    return save(fig, stem, dpi)


def fig_rho(df: pd.DataFrame, labels: dict, weights: dict, stem, alpha: float = 0.05, dpi: int = 150):
    """rho_t vs layer (fraction of tokens whose alignment increases), 0.5 line, Holm-significant filled."""
    style()
    models = list(df["model"].unique())
    fig, axes = grid(len(models), ncols=3, size=3.3)
    for ax, m in zip(axes, models):
        for i, (mode, g_all) in enumerate(df[df["model"] == m].groupby("mode", sort=True)):
            g = g_all[g_all["rho_p_holm"].notna()]  # the model's own depth (long shared-weight runs: its first L)
            sat = (g["rho_saturated"].fillna(False).astype(bool) if "rho_saturated" in g
                   else pd.Series(False, index=g.index))
            sig = (g["rho_p_holm"] < alpha) & (g["rho"] > 0.5) & ~sat  # as the claims count it
            ax.fill_between(g["layer"], g["rho_null_median"], g["rho_null_q95"], color=f"C{i}", alpha=0.15, lw=0,
                            label=f"{mode}: null, median to 95th percentile")
            ax.plot(g["layer"], g["rho"], color=f"C{i}", lw=1, ls="-" if mode == "model" else "--")
            ax.scatter(g["layer"][sig], g["rho"][sig], color=f"C{i}", s=14,
                       label=f"{mode}: rho > 0.5, p (Holm) < {alpha}")
            ax.scatter(g["layer"][~sig & ~sat], g["rho"][~sig & ~sat], facecolors="white", edgecolors=f"C{i}", s=14,
                       label=f"{mode}: not significant")
            if sat.any():
                ax.scatter(g["layer"][sat], g["rho"][sat], color=f"C{i}", marker="x", s=18,
                           label=f"{mode}: saturated (half or more of the draws tie)")
            if mode == "attention-only":
                _depth_note(ax, g_all, g)
        ax.axhline(0.5, color="0.3", lw=0.8, ls=":")
        ax.set_ylim(0, 1)
        ax.set_title(_name(labels, weights, m))
        ax.set_xlabel("layer t")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_ylabel(r"$\rho_t$ = share of tokens tilted to $v_{1,t}$")
    fig.suptitle("Share of tokens whose alignment with the layer's leading eigenvector increases (Monte Carlo "
                 "p against random subspaces, Holm across layers; dotted: 0.5)", y=1.0, fontsize=9)
    fig.tight_layout()
    legend_below(fig, *unique_handles(axes), ncol=3)
    return save(fig, stem, dpi)


def fig_albert_consensus(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int = 150):
    """Shared-weight models: alignment with v_1, with the leading subspace of I + F, and mean pairwise |cos|
    vs step, in both modes (colour: quantity; line style: mode)."""
    from matplotlib.lines import Line2D

    style()
    models = [m for m in df["model"].unique() if df[df["model"] == m]["shared"].iloc[0]]
    fig, axes = grid(max(len(models), 1), ncols=2, size=4.6)
    if not models:
        axes[0].text(0.5, 0.5, "no shared-weight model in this run", ha="center", va="center")
        axes[0].set_axis_off()
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
    """Token trajectories of shared-weight models projected on the leading plane (attention-only runs).

    ``runs``: dicts with label, weights, trajectory (steps+1, n, 2), leading_type, arg_mu1, mean_dtheta,
    rotation_plane."""
    from matplotlib.lines import Line2D

    style()
    fig, axes = grid(max(len(runs), 1), ncols=2, size=4.2)
    if not runs:
        axes[0].text(0.5, 0.5, "no shared-weight model in this run", ha="center", va="center")
        axes[0].set_axis_off()
    cmap = plt.get_cmap("viridis")
    for ax, r in zip(axes, runs):
        tr = r["trajectory"]
        n = tr.shape[1]
        for j in range(n):
            ax.plot(tr[:, j, 0], tr[:, j, 1], lw=0.6, color=cmap(j / max(n - 1, 1)), alpha=0.8)
            ax.scatter(tr[0, j, 0], tr[0, j, 1], s=10, marker="x", color="0.2", lw=0.8, zorder=3)
            ax.scatter(tr[-1, j, 0], tr[-1, j, 1], s=12, color="C3", zorder=4)
        th = np.linspace(0, 2 * np.pi, 200)
        ax.plot(np.cos(th), np.sin(th), color="0.7", lw=0.5)
        ax.set_aspect("equal")
        pred = r.get("predicted_dtheta", r["arg_mu1"])
        ax.set_title(f"{panel_title(r['label'], r['weights'])}\nleading eigenvalue of F: {r['leading_type']}\n"
                     f"angle turned per step in this plane: predicted {pred:+.3f} rad (argument of the\n"
                     f"eigenvalue of I + F that owns the plane), measured {r['mean_dtheta']:+.3f} rad "
                     "(mean of the last 20 steps)", fontsize=7.5)
        ax.set_xlabel(f"coordinate 1 in the plane: {r['rotation_plane']}")
        ax.set_ylabel("coordinate 2")
        sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(1, n))
        cb = fig.colorbar(sm, ax=ax, fraction=0.046, pad=0.03)
        cb.set_label("token (first prompt, position)", fontsize=7)
        cb.locator = matplotlib.ticker.MaxNLocator(integer=True)
        cb.update_ticks()
    fig.suptitle("Token trajectories (unit vectors) of the attention-only law projected on the leading plane",
                 y=1.0, fontsize=9)
    fig.tight_layout()
    legend_below(fig, [Line2D([], [], ls="", marker="x", color="0.2"), Line2D([], [], ls="", marker="o", color="C3"),
                       Line2D([], [], color="0.7", lw=0.8)],
                 ["step 0 (the embedding)", "final step", "unit circle (a token inside the plane)"], ncol=3)
    return save(fig, stem, dpi)


def fig_theory(real: dict, cplx: dict, bip: dict, pred: dict, stem, dpi: int = 150):
    """Three panels: (a) convergence to +-v1 vs the power-method rate, (b) plane distance and rotation
    angle vs arg(mu1), (c) the C4 sweep: fraction of perturbed bipartite equilibria that broke vs attention
    sharpness, per head count (colour) and size (line style), with the positive control's rate."""
    style()
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(13, 3.9))
    for i, att in enumerate(("full", "softmax")):
        e = real[f"err_{att}"]
        a.semilogy(np.arange(len(e)), np.maximum(e, 1e-17), color=f"C{i}", lw=1.4, label=f"{att} attention")
    t = np.arange(25)
    a.semilogy(t, 0.5 * pred["rate"] ** t, "k--", lw=0.8, label=r"predicted slope $|\mu_2/\mu_1|^t$")
    a.set_xlim(0, 60)
    a.set_xlabel("step t")
    a.set_ylabel(r"max distance to the line $\pm v_1$ (sin angle)")
    a.set_title("(a) real leading eigenvalue: consensus on $\\pm v_1$")
    a.legend(loc="upper right", fontsize=7)
    for i, att in enumerate(("full", "softmax")):
        dist = cplx[f"dist_{att}"]
        b.semilogy(np.arange(len(dist)), np.maximum(dist, 1e-17), color=f"C{i}", lw=1.4,
                   label=f"{att}: distance to the plane (left axis)")
    b.set_xlabel("step t")
    b.set_ylabel(r"max distance to span(Re $v_1$, Im $v_1$)")
    b2 = b.twinx()
    tail = []
    for i, att in enumerate(("full", "softmax")):
        d = np.asarray(cplx[f"dtheta_{att}"])
        b2.plot(np.arange(1, len(d) + 1), d, color=f"C{i}", ls=(0, (1, 1.5 + i)), lw=2.0, zorder=3,
                label=f"{att}: angle per step (right axis)")
        tail.append(d[len(d) // 4:])  # after the transient
    b2.axhline(pred["angle"], color="0.45", ls="-", lw=3.0, alpha=0.35, zorder=1,
               label=r"predicted: arg $\mu_1$ (right axis)")
    vals = np.concatenate(tail + [np.array([pred["angle"]])])
    lo, hi = float(np.nanmin(vals)), float(np.nanmax(vals))
    pad = max(0.05 * abs(pred["angle"]), 0.5 * (hi - lo), 1e-3)
    b2.set_ylim(lo - pad, hi + pad)  # set by the orbit, not by the transient of the first steps
    b2.set_ylabel("angle advanced per step (rad)")
    b2.grid(False)
    b.set_title("(b) complex leading pair: closed orbit in the plane")
    rate, sharp = np.asarray(bip["sweep_rate"], dtype=float), np.asarray(bip["sweep_sharpness"], dtype=float)
    heads, sizes = [int(h) for h in bip["sweep_heads"]], [int(x) for x in bip["sweep_sizes"]]
    styles = ["-", "--", ":", "-."]
    rate_all = np.asarray(bip.get("sweep_rate_all", rate), dtype=float)
    for si, d_ in enumerate(sizes):
        for hi, H in enumerate(heads):
            x = sharp * 1.06 ** (hi - (len(heads) - 1) / 2)  # a small offset per head count: no point hides another
            c.plot(x, rate[si, hi], color=f"C{hi}", ls=styles[si % 4], marker="osD^v<>"[hi % 7], ms=4,
                   label=f"{H} head{'s' if H > 1 else ''}")
            out = np.isnan(rate[si, hi]) & ~np.isnan(rate_all[si, hi])
            c.scatter(x[out], rate_all[si, hi][out], color=f"C{hi}", marker="x", s=16, alpha=0.6,
                      label="left out (no fixed point, or the control left): its break rate")
    for si, d_ in enumerate(sizes):
        c.plot([], [], color="0.3", ls=styles[si % 4], label=f"d = {d_}")
    pc = float(bip["positive_control_rate"])
    c.axhline(pc, color="0.3", lw=0.8, ls=(0, (1, 2)))
    c.text(sharp.min(), pc - 0.04, f"positive control (known unstable): {pc:.0%} broke", fontsize=7, va="top")
    c.set_xscale("log")
    c.set_ylim(-0.05, 1.05)
    c.set_xlabel("attention sharpness: typical |score| at the bipartite start")
    c.set_ylabel("fraction of perturbed runs that broke")
    c.set_title(f"(c) bipartite equilibrium perturbed by epsilon = {float(bip['epsilon']):g}:\n"
                "several heads vs one, over attention sharpness", fontsize=9)
    fig.suptitle("Theory checks on synthetic layers with prescribed spectra (no checkpoint involved)", y=1.02,
                 fontsize=9)
    fig.tight_layout()
    hb, lb = unique_handles([b, b2])
    hc, lc = unique_handles([c])
    legend_below(fig, hb + hc, lb + lc, ncol=3)
    return save(fig, stem, dpi)


def fig_steering(df: pd.DataFrame, labels: dict, weights: dict, stem, dpi: int = 150):
    """Top: mean |cos| with u after the edited last layer vs the norm of the change, per model (rank-1 and
    baseline, both modes). Bottom: probability of the target token, with the activation-addition baseline.
    Colour: target; line style: method (one legend for the figure)."""
    from matplotlib.lines import Line2D

    style()
    models = list(df["model"].unique())
    ncol = min(len(models), 4)
    nrow = -(-len(models) // ncol)
    fig, axes = plt.subplots(2 * nrow, ncol, figsize=(3.4 * ncol, 5.6 * nrow), squeeze=False)
    for j in range(len(models), nrow * ncol):  # empty places of the last row of models
        axes[2 * (j // ncol), j % ncol].set_visible(False)
        axes[2 * (j // ncol) + 1, j % ncol].set_visible(False)
    targets: list[str] = []
    for j, m in enumerate(models):
        g = df[(df["model"] == m) & (df["kappa"] >= 0)]
        top, bot = axes[2 * (j // ncol), j % ncol], axes[2 * (j // ncol) + 1, j % ncol]
        for tgt, gt in g.groupby("target", sort=False):
            kind = tgt.split(":")[0]
            if kind not in targets:
                targets.append(kind)
            c = f"C{targets.index(kind)}"
            r1 = gt[gt["method"].str.startswith("rank-1")]
            aa = gt[gt["method"].str.startswith("activation")]
            r1, aa = r1[r1["kappa"] > 0], aa[aa["kappa"] > 0]
            x1 = r1["change_norm_model"]
            top.plot(x1, r1["cos_after_layer_model"], "-o", ms=3, color=c)
            top.plot(r1["change_norm_attention_only"], r1["cos_after_layer_attention_only"], "--", color=c)
            top.plot(aa["change_norm_model"], aa["cos_after_layer_model"], ":s", ms=3, color=c)
            if "cos_pu_after_layer_model" in r1 and r1["cos_pu_after_layer_model"].notna().any():
                # a norm follows W_O (Gemma 3): what the residual stream receives points along p * u
                top.plot(x1, r1["cos_pu_after_layer_model"], "-.^", ms=3, color=c)
                cap = float(r1["post_norm_cap"].iloc[0])
                top.axvline(cap, color="0.5", lw=0.8, ls=(0, (1, 3)))
                top.text(cap, 0.02, " cap", fontsize=7, color="0.4")
            if r1["p_target"].notna().any():
                bot.plot(x1, r1["p_target"], "-o", ms=3, color=c)
                bot.plot(x1, aa["p_target"], ":s", ms=3, color=c)
        for ax in (top, bot):
            ax.set_xscale("log")
            ax.set_xlabel("norm of the change the residual stream receives")
        top.set_ylim(0, 1.02)
        top.set_ylabel(r"mean $|\cos(x_i, u)|$ after the last layer")
        top.set_title(_name(labels, weights, m))
        if not g["p_target"].notna().any():
            bot.text(0.5, 0.5, "no LM head:\nvector alignment only", ha="center", va="center",
                     transform=bot.transAxes)
            bot.set_xticks([])
        bot.set_ylabel("mean P(target token)")
    hs = [Line2D([], [], color=f"C{i}", lw=2) for i in range(len(targets))]
    ls = [f"target: {t} (u = its {'row' if t != 'random' else 'seeded random unit vector'})" for t in targets]
    hs += [Line2D([], [], color="0.3", ls="-", marker="o", ms=3), Line2D([], [], color="0.3", ls="--"),
           Line2D([], [], color="0.3", ls=":", marker="s", ms=3)]
    ls += ["rank-1 change of W_O, real forward pass", "rank-1 change, attention-only law",
           "activation addition, same site and norm of change"]
    if "cos_pu_after_layer_model" in df and df["cos_pu_after_layer_model"].notna().any():
        hs.append(Line2D([], [], color="0.3", ls="-.", marker="^", ms=3))
        ls.append("rank-1, alignment with p * u (post-attention norm gain p; dotted line: its cap)")
    fig.suptitle("Steering by a rank-1 change of the last layer's output matrix vs activation addition at the "
                 "same site, over the mean norm of the change there (one point per kappa > 0)", y=1.0, fontsize=9)
    fig.tight_layout()
    legend_below(fig, hs, ls, ncol=3)
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
    from .io import read_json
    from .tables import alignment_table, write_table

    shared = {m["model"]: m["shared_weights"] for m in map(read_json, metas)}
    df = pd.concat([pd.read_csv(p) for p in csvs], ignore_index=True)
    df["shared"] = df["model"].map(shared)
    weights = dict(zip(df["model"], df["weights"]))
    fig_gamma(df, labels, weights, stems["fig_gamma"], dpi)
    fig_rho(df, labels, weights, stems["fig_rho"], alpha, dpi)
    fig_albert_consensus(df, labels, weights, stems["fig_albert_consensus"], dpi)
    fig_albert_rotation(rotation_runs(csvs, npzs, shared, labels, weights), stems["fig_albert_rotation"], dpi)
    t = alignment_table(df, labels, alpha)
    write_table(t, stems["table_alignment"], caption="Alignment of tokens with each layer's leading eigenvector: "
                "gamma vs null models, rho > 0.5 and sign-test significance after Holm correction.")
    return t
