"""fig_theory: the synthetic-layer checks (C2, C3, C4) in four panels (paper.md section 4d, revision 5)."""

from __future__ import annotations

import matplotlib.ticker
import numpy as np
from matplotlib.lines import Line2D

from powerlens.outputs.plotting import plt, save, style


def fig_theory(real: dict, cplx: dict, bip: dict, notes: dict, stem, dpi: int):
    """Four panels: (a) C2: the worst token's distance to the line of v_1 per step, at each sharpness of the sweep
    (softmax attention, the first weight seed) and for the uniform-attention positive control beside the
    power-method slope; (b) C3: the distance to the leading plane, likewise; (c) the angle advanced per step in
    the plane; (d) C4: each equilibrium's spectral radius against the sharpness measured at it, strata marked.
    ``notes``: the legend's words per sharpness (``C2``, ``C3``: "8 of 8 seeds") and C4's p."""
    style()
    fig, ((a, b), (bb, c)) = plt.subplots(2, 2, figsize=(11, 7.4))
    _curves(a, real["err_sweep"], real["err_control"], real["sweep_sharpness"], notes.get("C2", {}),
            float(real["rate_control"]), "max distance to the line of $v_1$ (sin angle)",
            "(a) C2, real leading eigenvalue: consensus on $v_1$")
    _curves(b, cplx["dist_sweep"], None, cplx["sweep_sharpness"], notes.get("C3", {}), None,
            "max distance to span(Re $v_1$, Im $v_1$)", "(b) C3, complex leading pair: tokens reach the plane")
    _angles(bb, cplx)
    _theory_c4(c, bip, notes.get("C4", ""))
    fig.suptitle("Theory checks on synthetic layers with prescribed spectra (no checkpoint involved): softmax "
                 "attention from random W_Q, W_K at each sharpness\n(typical |score| of the start); uniform "
                 "attention, where the law is exactly the power method, as the positive control", y=1.0,
                 fontsize=9.5)
    fig.tight_layout()
    return save(fig, stem, dpi)


def _curves(ax, sweep, control, sharp, words: dict, rate, ylabel: str, title: str) -> None:
    sweep = np.asarray(sweep, dtype=float)
    cmap = plt.get_cmap("viridis")
    for i, s in enumerate(np.asarray(sharp, dtype=float)):
        e = sweep[i]
        ax.semilogy(np.arange(len(e)), np.maximum(e, 1e-17), color=cmap(i / max(1, len(sharp) - 1)), lw=1.2,
                    label=f"|score| {s:g}" + (f": {words[s]}" if s in words else ""))
    if control is not None:
        e = np.asarray(control, dtype=float)
        ax.semilogy(np.arange(len(e)), np.maximum(e, 1e-17), color="0.1", lw=1.6, ls="--",
                    label="uniform attention (control)")
        t = np.arange(40)
        ax.semilogy(t, 0.5 * rate ** t, color="C3", lw=0.9, ls=":", label=r"slope $|\mu_2/\mu_1|^t$")
    ax.set_ylim(1e-17, 3)
    ax.set_xlabel("step t")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper right", fontsize=6.5)


def _angles(bb, cplx: dict) -> None:
    """(c) the angle advanced per step in the coordinates of Re v_1, Im v_1: the control's is arg(mu_1) at every
    step; with softmax attention each sharpness settles on an angle of its own (a closed orbit all the same)."""
    ctl = np.asarray(cplx["dtheta_control"], dtype=float)
    sweep = np.asarray(cplx["dtheta_sweep"], dtype=float)
    sharp = np.asarray(cplx["sweep_sharpness"], dtype=float)
    cmap = plt.get_cmap("viridis")
    steps = np.arange(1, sweep.shape[1] + 1)
    for i, s in enumerate(sharp):
        bb.plot(steps, sweep[i], color=cmap(i / max(1, len(sharp) - 1)), lw=1.1, label=f"|score| {s:g}")
    bb.plot(np.arange(1, len(ctl) + 1), ctl, color="0.1", lw=1.6, ls="--",
            label=f"uniform attention (control): arg $\\mu_1$ = {float(cplx['angle_control']):.4f} rad")
    tail = sweep[:, sweep.shape[1] // 4:]
    lo, hi = float(min(tail.min(), ctl.min())), float(max(tail.max(), ctl.max()))
    pad = max(0.1 * (hi - lo), 0.02)
    bb.set_ylim(lo - pad, hi + pad)
    bb.set_xlabel("step t")
    bb.set_ylabel("angle advanced per step in the plane (rad)")
    bb.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter(useOffset=False))
    bb.set_title("(c) C3: rotation per step in the leading plane", fontsize=9)
    bb.legend(loc="lower right", fontsize=6.5)


def _theory_c4(c, bip: dict, note: str) -> None:
    """(d) C4: every cell and weight seed with an equilibrium, its spectral radius (> 1: unstable) against the
    mean |score| measured at the equilibrium; colour: head count; filled: unstable; crosses on the left: uniform
    attention at the equilibrium (degenerate, their own stratum); dotted verticals: the strata's edges."""
    score = np.asarray(bip["cell_score"], dtype=float)
    rad = np.asarray(bip["cell_radius"], dtype=float)
    heads = np.asarray(bip["cell_heads"], dtype=float).astype(int)
    deg = np.asarray(bip["cell_degenerate"], dtype=bool)
    found = np.asarray(bip["cell_found"], dtype=bool)
    sharp = np.asarray(bip["sweep_sharpness"], dtype=float)
    hs = [int(h) for h in bip["sweep_heads"]]
    left = sharp.min() / 4  # where the degenerate ones are drawn
    for hi, H in reversed(list(enumerate(hs))):  # one head drawn last: on top
        m = found & (heads == H)
        x = np.where(deg[m], left * 1.08 ** (hi - 1.5), score[m])
        unstable = rad[m] > 1 + 1e-6
        col = f"C{hi}"
        size = 22 if H == 1 else 14
        c.scatter(x[unstable & ~deg[m]], rad[m][unstable & ~deg[m]], s=size, color=col, marker="o", zorder=3)
        c.scatter(x[~unstable & ~deg[m]], rad[m][~unstable & ~deg[m]], s=size, facecolors="white", edgecolors=col,
                  marker="o", zorder=3, linewidths=1.2 if H == 1 else 0.8)
        c.scatter(x[deg[m]], rad[m][deg[m]], s=16, color=col, marker="x", zorder=3)
    for e in np.sqrt(sharp[1:] * sharp[:-1]):
        c.axvline(e, color="0.6", lw=0.6, ls=":")
    c.axvline(left * 2, color="0.4", lw=0.8)
    c.axhline(1.0, color="0.2", lw=0.8)
    pc = float(bip.get("positive_control_radius", np.nan))
    c.axhline(pc, color="0.3", lw=0.8, ls=(0, (1, 2)))
    c.set_xscale("log")
    c.set_yscale("log")
    c.set_xlim(left / 2, max(sharp.max(), float(np.nanmax(score[found & ~deg]) if (found & ~deg).any() else 1)) * 3)
    c.set_xlabel("mean |score| at the equilibrium (left of the solid line: uniform attention there)")
    c.set_ylabel("spectral radius of one law step's Jacobian\n(tangent space; above 1: unstable)")
    c.set_title(f"(d) C4: bipartite equilibria by linearisation; {note}\ndotted: the strata; dash-dot: positive "
                f"control ({pc:.3g})", fontsize=9)
    hd = [Line2D([], [], color=f"C{hi}", marker="o", ls="") for hi in range(len(hs))]
    hd += [Line2D([], [], color="0.3", marker="o", ls="", mfc="white"), Line2D([], [], color="0.3", marker="x", ls="")]
    c.legend(hd, [f"{H} head{'s' if H > 1 else ''} (filled: unstable)" for H in hs] + ["open: stable or neutral",
             "x: uniform attention (degenerate)"], fontsize=6.5, loc="upper left")
