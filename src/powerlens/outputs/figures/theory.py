"""fig_theory: the synthetic-layer checks (C2, C3, C4) in four panels."""

from __future__ import annotations

import matplotlib.ticker
import numpy as np
from matplotlib.lines import Line2D

from powerlens.outputs.plotting import plt, save, style


def fig_theory(real: dict, cplx: dict, bip: dict, pred: dict, stem, dpi: int):
    """Four panels: (a) convergence to +-v1 vs the power-method rate, (b) distance to the plane of a complex
    leading pair, (c) the angle advanced per step vs arg(mu1), (d) the C4 sweep: fraction of perturbed
    bipartite equilibria that broke vs attention sharpness, per head count and size, with the positive
    control. "full" attention: every attention weight equal (the setting of the theory); "softmax": random
    W_Q, W_K (how far a real attention moves the prediction)."""
    style()
    fig, ((a, b), (bb, c)) = plt.subplots(2, 2, figsize=(11, 8.6))  # 2 x 2: readable at a page's width
    _theory_real(a, real, pred)
    _theory_complex(b, bb, cplx, pred)
    _theory_c4(c, bip)
    fig.suptitle("Theory checks on synthetic layers with prescribed spectra (no checkpoint involved).\nFull "
                 "attention: every attention weight equal (the theory's setting); softmax: random W_Q, W_K",
                 y=1.02, fontsize=10)
    fig.tight_layout()
    return save(fig, stem, dpi)


def _theory_real(a, real: dict, pred: dict) -> None:
    """(a) convergence to +-v1 against the power method's rate."""
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


def _theory_complex(b, bb, cplx: dict, pred: dict) -> None:
    """(b) distance to the plane of a complex leading pair, (c) the angle advanced per step vs arg(mu1)."""
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


def _theory_c4(c, bip: dict) -> None:
    """(d) the C4 sweep: spectral radius of one law step's Jacobian at each cell's Newton-refined bipartite
    equilibrium vs attention sharpness, per head count and size (filled marker: the perturbed runs broke in
    more than half the runs; open: in at most half), the line 1 (unstable above) and the positive control."""
    rad, sharp = np.asarray(bip["sweep_radius"], dtype=float), np.asarray(bip["sweep_sharpness"], dtype=float)
    rate = np.asarray(bip["sweep_rate_all"], dtype=float)
    tested = np.isfinite(np.asarray(bip["sweep_rate"], dtype=float))
    heads, sizes = [int(h) for h in bip["sweep_heads"]], [int(x) for x in bip["sweep_sizes"]]
    styles = ["-", "--", ":", "-."]
    for si, d_ in enumerate(sizes):
        for hi, H in enumerate(heads):
            x = sharp * 1.06 ** (hi - (len(heads) - 1) / 2)  # a small offset per head count: no point hides another
            c.plot(x, rad[si, hi], color=f"C{hi}", ls=styles[si % 4], lw=0.8)
            for j in range(len(sharp)):
                if not np.isfinite(rad[si, hi, j]):
                    continue
                c.plot(x[j], rad[si, hi, j], marker="osD^v<>"[hi % 7], ms=5 if tested[si, hi, j] else 3,
                       color=f"C{hi}", mfc=f"C{hi}" if rate[si, hi, j] > 0.5 else "white",
                       alpha=1.0 if tested[si, hi, j] else 0.35)
    c.axhline(1.0, color="0.2", lw=0.8)
    pc = float(bip.get("positive_control_radius", np.nan))
    c.axhline(pc, color="0.3", lw=0.8, ls=(0, (1, 2)))
    c.text(sharp.min(), pc * 1.04, f"positive control (a known unstable equilibrium): radius {pc:.3g}, "
           f"{float(bip['positive_control_rate']):.0%} of runs broke", fontsize=7, va="bottom")
    c.text(1.02, 0.0, f"{int(tested.sum())} of {rad.size} cells tested;\nno marker: degenerate (uniform\nattention at the "
           "equilibrium)\nor no equilibrium\n(table_theory lists every cell);\n"
           "filled: more than half\nthe perturbed runs broke", transform=c.transAxes, fontsize=7, ha="left",
           va="bottom")
    c.set_xscale("log")
    c.set_yscale("log")
    c.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())  # ticks at the sweep's sharpness values only
    c.set_xticks(sharp, [f"{v:g}" for v in sharp])
    c.set_xlabel("attention sharpness: typical |score| at the bipartite start")
    c.set_ylabel("spectral radius of one law step's Jacobian\n(tangent space; > 1: unstable)")
    c.set_title(f"(d) bipartite equilibrium (Newton-refined), linearised;\ncheck: perturbed by epsilon = "
                f"{float(bip['epsilon']):g} (softmax attention)", fontsize=9)
    hd = [Line2D([], [], color=f"C{hi}", marker="osD^v<>"[hi % 7], ms=4) for hi in range(len(heads))]
    hd += [Line2D([], [], color="0.3", ls=styles[si % 4]) for si in range(len(sizes))]
    c.legend(hd, [f"{H} head{'s' if H > 1 else ''}" for H in heads] + [f"d = {d_}" for d_ in sizes], fontsize=7,
             loc="center left", bbox_to_anchor=(1.01, 0.5))

