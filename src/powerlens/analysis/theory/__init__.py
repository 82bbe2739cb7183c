"""Theory checks on synthetic multi-head layers with a prescribed spectrum (paper.md sections 2, 4d and 7).

Write M for the matrix one step iterates: M = I + F when the update keeps the residual (the paper's law
x <- N(x + attn(x))), M = F without it; mu_1, mu_2 are its eigenvalues by modulus. Under *uniform* attention
(every softmax weight 1/n) the attention output is F times the tokens' mean, so from a consensus start each
step is exactly a power-method step on M: that is each claim's positive control (the analytic rate or angle to
1e-9). The claims themselves are judged with softmax attention from random W_Q, W_K over a sweep of attention
sharpness and weight seeds (revision 5):

(a) C2, real strictly dominant mu_1: tokens starting in a hemisphere reach consensus on +-v_1 (a residual);
    how isotropic starts end is reported beside it (:func:`~.synthetic.ending`);
(b) C3, dominant complex pair: tokens reach the plane span(Re v_1, Im v_1) and rotate in it (a closed orbit);
(c) C4, bipartite consensus (two groups of tokens on +w and -w): with several softmax heads +-v_1 is not a
    fixed point, so the equilibrium is found by Newton's method, continued from +-v_1 along the sharpness; its
    stability is the spectral radius of one law step's Jacobian on the tangent space (:mod:`linearise`);
    several heads against one, stratum by stratum of the sharpness measured at the equilibrium (an exact
    stratified test, :func:`~.verdicts.c4_verdict`), beside a positive control known to be unstable; how often
    random starts end bipartite is C4's "rare".
"""

from __future__ import annotations

import importlib

#: Where each public name lives. The package imports none of them until one is asked for (PEP 562), so the
#: claims, tables and figures read the verdicts (:mod:`.verdicts`, numpy and scipy only) without importing
#: the attention law's torch.
_WHERE = {
    **dict.fromkeys(["prescribed_matrix", "synthetic_layer", "step_matrix", "leading_pair", "iterate",
                     "line_distance", "plane_distance", "Result", "clustered_starts", "experiment_real",
                     "experiment_complex", "typical_score", "sharpened", "ending", "ENDINGS"], "synthetic"),
    **dict.fromkeys(["bipartite_state", "plain_iteration", "newton_equilibrium", "antipodal", "broken_runs",
                     "experiment_c4_sweep"], "bipartite"),
    **dict.fromkeys(["c4_verdict", "c23_verdict", "stratified_exact", "block", "stratum", "rare_bound", "C2_LINE_TOL",
                     "C3_DIST_TOL", "C23_SHARE", "CONTROL_TOL"], "verdicts"),
}

__all__ = list(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
