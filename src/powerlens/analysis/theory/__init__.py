"""Theory checks on synthetic multi-head layers with a prescribed spectrum (paper.md sections 2 and 7).

Write M for the matrix one step iterates: M = I + F when the update keeps the residual (the paper's law
x <- N(x + attn(x))), M = F without it; mu_1, mu_2 are its eigenvalues by modulus. Under *full* attention
(every softmax weight 1/n) the attention output is F times the tokens' mean, so once the tokens agree each
step is exactly a power-method step on M. Predictions checked here:

(a) real, strictly dominant mu_1: tokens converge to +-v_1 at the asymptotic rate |mu_2 / mu_1| per step;
(b) dominant complex pair: tokens converge to the plane span(Re v_1, Im v_1) and rotate in it by
    arg(mu_1) per step (a closed orbit); angles are measured in the coordinates of Re v_1, Im v_1, where M
    acts as an exact rotation-scaling;
(c) bipartite consensus (two groups of tokens on +w and -w). With several softmax heads +-v_1 is *not* a
    fixed point (each head weighs the two groups differently), so the equilibrium is found first: iterate
    from a bipartite start on +-v_1 (the iteration keeps the state exactly bipartite), then refine by
    Newton to a fixed point (residual < 1e-9); its stability is the spectral radius of one law step's
    Jacobian on the tangent space (:mod:`linearise`), and perturbed runs are a check. Run over a sweep of
    sizes, head counts and attention sharpness (uniform attention at the equilibrium: degenerate, not
    tested), unstable cells with several heads against one head by a one-sided Fisher test over cells,
    beside a positive control whose equilibrium is known to be unstable (:func:`experiment_c4_sweep`,
    :func:`c4_verdict`). (With full attention and equal groups the attention
    output of a bipartite state is zero, so every bipartite state is a fixed point: softmax attention only.)

Then (a) and (b) are repeated with softmax attention from random W_Q, W_K to see how far the measured
values move from the full-attention prediction.
"""

from __future__ import annotations

import importlib

#: Where each public name lives. The package imports none of them until one is asked for (PEP 562), so the
#: claims, tables and figures read the verdicts (:mod:`.verdicts`, numpy and scipy only) without importing
#: the attention law's torch.
_WHERE = {
    **dict.fromkeys(["prescribed_matrix", "synthetic_layer", "step_matrix", "leading_pair", "iterate",
                     "line_distance", "plane_distance", "fit_rate", "Result", "clustered_starts", "experiment_real",
                     "experiment_complex"], "synthetic"),
    **dict.fromkeys(["bipartite_state", "STALL_STEPS", "STALL_MOVED", "bipartite_equilibrium", "antipodal",
                     "typical_score", "broken_runs", "experiment_c4_sweep"], "bipartite"),
    **dict.fromkeys(["c4_verdict", "C2_REL_TOL", "C3_DIST_TOL", "C3_ANGLE_TOL"], "verdicts"),
}

__all__ = list(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
