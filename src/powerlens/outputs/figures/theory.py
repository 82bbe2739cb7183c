"""fig_theory: the synthetic-layer checks (C2, C3, C4) in four panels (paper.md section 4d, revision 5)."""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from powerlens.outputs.plotting import HEIGHT_MAX, WIDTH, legend_below, plt, save, style


def fig_theory(real: dict, cplx: dict, bip: dict, notes: dict, stem, dpi: int):
    """Four panels: (a) C2: the worst token's distance to the line of v_1 per step, at each sharpness of the sweep
    (softmax attention, the first weight seed) and for the uniform-attention positive control beside the
    power-method slope; (b) C3: the distance to the leading plane, likewise; (c) the angle advanced per step in
    the plane as its deviation from arg(mu_1) (log scale); (d) C4: each equilibrium's spectral radius against
    the sharpness measured at it, strata marked. ``notes``: the seeds reaching the end state per sharpness
    (``C2``, ``C3``: "8 of 8 seeds") and C4's p. One legend below for the sweep's colours (a-c)."""
    style()
    fig, ((a, b), (bb, c)) = plt.subplots(2, 2, figsize=(WIDTH, HEIGHT_MAX))
    sharp = np.asarray(real["sweep_sharpness"], dtype=float)
    _curves(a, real["err_sweep"], real["err_control"], sharp, float(real["rate_control"]),
            "distance to line of $v_1$", "(a) C2: consensus on $v_1$" + _seeds(notes.get("C2", {}), sharp))
    _curves(b, cplx["dist_sweep"], None, np.asarray(cplx["sweep_sharpness"], dtype=float), None,
            "distance to the plane", "(b) C3: tokens reach the plane" + _seeds(notes.get("C3", {}), sharp))
    _angles(bb, cplx)
    _theory_c4(c, bip, notes.get("C4", ""))
    hs = [Line2D([], [], lw=1.2, **_sweep_style(i, len(sharp), legend=True)) for i in range(len(sharp))]
    hs.append(Line2D([], [], color="0.1", lw=1.6, ls="--"))
    legend_below(fig, hs, [f"|score| {s:g}" for s in sharp] + ["uniform attention (control)"], ncol=6)
    return save(fig, stem, dpi)


#: Head counts of panel (d): Okabe-Ito blue, orange, green, pink, sky blue (no two alike), each with its own marker
HEAD_COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#000000"]
HEAD_MARKERS = ["o", "s", "D", "^", "v", "P"]
SWEEP_LINES = ["-", (0, (5, 2)), "-.", (0, (1, 1.5)), (0, (6, 1.5, 1, 1.5, 1, 1.5))]
SWEEP_MARKERS = ["o", "s", "D", "^", "v", "P", "X"]


def _sweep_style(i: int, n: int, legend: bool = False) -> dict:
    """Curve ``i`` of ``n`` in the sharpness sweep: a viridis colour, its own line style, and its own marker
    placed every 25 steps from a start of its own, so that curves lying on one another stay visible."""
    kw = {"color": plt.get_cmap("viridis")(i / max(1, n - 1)), "ls": SWEEP_LINES[i % len(SWEEP_LINES)],
          "marker": SWEEP_MARKERS[i % len(SWEEP_MARKERS)], "ms": 4, "mfc": "none"}
    if not legend:
        kw["markevery"] = (3 + 5 * i, 25)
    return kw


def _seeds(words: dict, sharp) -> str:
    """The seeds reaching the end state per sharpness, in the sweep's order ("8/8/7/8/8 of 8 seeds")."""
    got = [str(words[s]).split(" of ") for s in sharp if s in words]
    if not got:
        return ""
    return "\nseeds reaching it: " + "/".join(g[0] for g in got) + (f" of {got[0][1].split()[0]}" if len(got[0]) > 1
                                                                     else "")


def _curves(ax, sweep, control, sharp, rate, ylabel: str, title: str) -> None:
    sweep = np.asarray(sweep, dtype=float)
    for i, _ in enumerate(np.asarray(sharp, dtype=float)):
        e = sweep[i]
        ax.semilogy(np.arange(len(e)), np.maximum(e, 1e-17), lw=1.1, **_sweep_style(i, len(sharp)))
    if control is not None:
        e = np.asarray(control, dtype=float)
        ax.semilogy(np.arange(len(e)), np.maximum(e, 1e-17), color="0.1", lw=1.6, ls="--")
        t = np.arange(40)
        ax.semilogy(t, 0.5 * rate ** t, color="C3", lw=1.0, ls=":", label=r"slope $|\mu_2/\mu_1|^t$")
        ax.legend(loc="upper right", fontsize=8)
    ax.set_ylim(1e-17, 3)
    ax.set_xlabel("step t")
    ax.set_ylabel(ylabel)
    ax.set_title(title)


def _angles(bb, cplx: dict) -> None:
    """(c) the angle advanced per step in the coordinates of Re v_1, Im v_1, as its distance from the control's
    arg(mu_1) on a log scale: the control sits at rounding error from the start, softmax attention settles on
    it (or on an angle of its own, a closed orbit all the same) at a rate the log scale shows."""
    ctl = np.asarray(cplx["dtheta_control"], dtype=float)
    arg = float(cplx["angle_control"])
    sweep = np.asarray(cplx["dtheta_sweep"], dtype=float)
    sharp = np.asarray(cplx["sweep_sharpness"], dtype=float)
    steps = np.arange(1, sweep.shape[1] + 1)
    for i, _ in enumerate(sharp):
        bb.semilogy(steps, np.maximum(np.abs(sweep[i] - arg), 1e-17), lw=1.0, **_sweep_style(i, len(sharp)))
    bb.semilogy(np.arange(1, len(ctl) + 1), np.maximum(np.abs(ctl - arg), 1e-17), color="0.1", lw=1.6, ls="--")
    bb.set_ylim(1e-17, 10)
    bb.set_xlabel("step t")
    bb.set_ylabel(r"|angle per step $-$ arg $\mu_1$| (rad)")
    bb.set_title(f"(c) C3: rotation per step\n(arg $\\mu_1$ = {arg:.3f} rad)")


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
        col, mk = HEAD_COLOURS[hi % len(HEAD_COLOURS)], HEAD_MARKERS[hi % len(HEAD_MARKERS)]
        size = 22 if H == 1 else 14
        c.scatter(x[unstable & ~deg[m]], rad[m][unstable & ~deg[m]], s=size, color=col, marker=mk, zorder=3)
        c.scatter(x[~unstable & ~deg[m]], rad[m][~unstable & ~deg[m]], s=size, facecolors="white", edgecolors=col,
                  marker=mk, zorder=3, linewidths=1.2 if H == 1 else 0.8)
        c.scatter(x[deg[m]], rad[m][deg[m]], s=16, color=col, marker="x", zorder=3)
    for e in np.sqrt(sharp[1:] * sharp[:-1]):
        c.axvline(e, color="0.6", lw=0.6, ls=":")
    c.axvline(left * 2, color="0.4", lw=0.8)
    c.axhline(1.0, color="0.2", lw=0.8)
    pc = float(bip.get("positive_control_radius", np.nan))
    c.axhline(pc, color="0.3", lw=0.9, ls="-.")
    c.set_xscale("log")
    c.set_yscale("log")
    c.set_xlim(left / 2, max(sharp.max(), float(np.nanmax(score[found & ~deg]) if (found & ~deg).any() else 1)) * 3)
    c.set_xlabel("mean |score| at the equilibrium")
    c.set_ylabel("spectral radius (Jacobian)")
    c.set_title(f"(d) C4: bipartite equilibria\n{note}")
    hd = [Line2D([], [], color=HEAD_COLOURS[hi % len(HEAD_COLOURS)], marker=HEAD_MARKERS[hi % len(HEAD_MARKERS)],
                 ls="") for hi in range(len(hs))]
    hd += [Line2D([], [], color="0.3", marker="o", ls="", mfc="white"), Line2D([], [], color="0.3", marker="x", ls="")]
    # above the panels (inside (d) it would cover equilibria): the markers of (d) only
    legend_below(c.figure, hd, ["(d) 1 head" if H == 1 else f"{H} heads" for H in hs]
                 + ["open: stable", "x: uniform attention"], ncol=len(hd), loc="upper center")
