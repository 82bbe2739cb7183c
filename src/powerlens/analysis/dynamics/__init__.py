"""Token dynamics over a prompt corpus, in two modes (paper.md section 5).

``model``           the real pretrained forward pass (FFN and LayerNorm included); forward hooks read the
                    input x(t) and output x(t+1) of every layer.
``attention-only``  the paper's law, FFN removed:
                    x_i(t+1) = N( x_i(t) + sum_h W_O^h sum_j A^h_ij(t) (W_V^h x_j(t) + b_V^h) + b_O ),
                    A from the layer's own W_Q, W_K (causal masks for GPT models, GPT-Neo's unscaled
                    scores and local windows); N = L2 normalisation (default) or the layer's own norm
                    (LayerNorm or RMSNorm, :func:`~powerlens.models.attention.law_norm`).
                    x(0) is the model's embedding output (ALBERT: after its embedding projection).
                    Shared-weight models iterate their one layer for ``steps`` steps.

For every depth t the tokens' alignment with layer t's leading direction D_t (paper.md section 4) is
measured before and after the layer: a_i(t) = align(x_i(t), D_t), a_i(t+1) = align(x_i(t+1), D_t), in
float64 whatever the dynamics dtype. From them, per depth: gamma_t = mean a_i(t+1), rho_t = share of tokens
whose alignment increases, and the tilt = mean (a_i(t+1) - a_i(t)). Directions measured on the same tokens:

* ``lead``    F_t's leading eigenvector (or the plane of a complex leading pair): the paper's direction;
* ``lead_M``  the leading direction of M_t = I + F_t (the matrix one residual step iterates);
* ``lead_Ft`` pre-norm models: the leading direction of the norm-folded F~_t = F_t diag(g);
* ``null_eig`` a seeded random non-leading eigen-direction of F_t of the lead's dimension (a second null);
* the verdict statistics (:mod:`~powerlens.analysis.dynamics.decided`, paper.md sections 4b and 4c): each of
  F_t's lead's statistics against two nulls, R random subspaces of the lead's dimension (a seeded stream,
  extended where the Monte Carlo error straddles alpha) and all of F_t's other eigen-directions, each with
  Holm across the depth, decided yes / no / undecided; in the real forward pass also across the attention and
  the FFN sublayers (C10).

The verdict statistics need the counted tokens' states at the model's own depths (:class:`probes.States`),
kept once per run; past the depth (long runs) only per-depth sums are kept.
One function runs the analysis (:func:`analyse`, module ``analyse``); ``directions``, ``accumulate``,
``runs`` and ``per_depth`` hold its parts.

Long shared-weight runs (``steps`` past the model's depth) keep per-depth sums for the lead only, plus the
null of the consensus subspace at the final step (claim C5).
"""

from __future__ import annotations

from powerlens.analysis.dynamics.accumulate import Accumulator, layer_io
from powerlens.analysis.dynamics.analyse import MODES, DynamicsOptions, DynamicsRun, analyse, verdict_table
from powerlens.analysis.dynamics.directions import LEADS, NAMED, LayerDirections, layer_directions
from powerlens.analysis.dynamics.per_depth import layer_stats
from powerlens.analysis.dynamics.runs import (
                                              bias_free,
                                              l2_law_diagnostics,
                                              long_run_subset,
                                              null_sets,
                                              run_attention_only,
                                              run_model_mode,
)

__all__ = ["analyse", "verdict_table", "DynamicsOptions", "DynamicsRun", "MODES", "Accumulator", "layer_io", "LEADS",
           "NAMED", "LayerDirections", "layer_directions", "layer_stats", "null_sets", "run_model_mode", "bias_free",
           "l2_law_diagnostics", "long_run_subset", "run_attention_only"]
