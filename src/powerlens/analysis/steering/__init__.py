"""Steering by a rank-1 change of the last layer's output matrix (paper.md section 6, claim C9).

Given a unit target u in token space, choose z with V^T z = u (least squares when V is singular) and set

    O' = O + alpha u z^T,   so that   F' = O' V = F + alpha u (V^T z)^T = F + alpha u u^T,

with alpha = kappa |lambda_1(F)|. For large alpha, u becomes F''s principal eigenvector. With grouped-query
attention V has rank H_kv d_h < d: least squares gives V^T z = P u (P the projector on V's row space) and
F' = F + alpha u (P u)^T, not normal; ``lstsq_residual`` = ||V^T z - u|| is reported per target and the bound
below is stated only where z solves V^T z = u exactly (:func:`bound_note`); the eigen-check of F' (the
matrix the edit really makes) decides "u principal" everywhere. The bound the code
states (``kappa_bound``) follows from Bauer-Fike (alpha u u^T is normal, with eigenvalues alpha and 0):
if alpha > 2 ||F||_2 exactly one eigenvalue mu of F' lies within ||F||_2 of alpha, and it dominates; its
eigenvector w satisfies sin angle(w, u) <= ||F||_2 / (alpha - ||F||_2) (project F' w = mu w onto u's
orthogonal complement). So alpha >= ||F||_2 (1 + 1/delta) with delta <= 1 makes u principal up to sin <= delta.

The change is applied to a loaded model by :func:`rank1_output_edit`, a context manager that edits the
last layer's output projection in place and restores it byte for byte (a checksum proves it). For
shared-weight models (ALBERT) the last layer is the shared one, so every depth sees the change
(``shared_edit = "every_depth"``), in both dynamics modes and for both methods; ``"last_depth"`` applies
both methods at the last depth only (paper.md section 6 allows either; the outputs say which). The baseline
is activation addition at the same site: beta u added to the output projection's output (at the same
depths as the edit). The two are
compared on curves over the norm of the change at the site: the edit changes it by alpha u (z^T h), whose
mean norm alpha |z^T h| sets the baseline's beta for each kappa (matched norm of change). The edit also adds
the constant alpha u (z^T b_V) when V has a bias (rows of A sum to one): its size is reported.

Where a norm follows the edited W_O before the residual add (Gemma 3's post-attention RMSNorm, gain p; the
adapter's :meth:`~powerlens.models.adapters.Adapter.output_norm`), every change at that site reaches the residual
stream through the norm: its norm is capped (``post_norm_cap`` = sqrt(d) max |p_i|, the largest norm the
norm's output can have, eps aside) and its direction tends to p * u, not u. There the matched norm of change
is measured after the norm, where the residual stream receives it (||P(o') - P(o)||, mean over counted
tokens), the baseline adds beta u after the norm, and the alignment with p * u (normalised) is reported
beside the alignment with u.

Modules: ``algebra`` (the rank-1 maths), ``edits`` (in-place edits and hooks, the target u), ``measure``
(model mode), ``law`` (the attention-only law with the edit), ``experiment`` (every target and kappa; how far the
sweeps go is :mod:`powerlens.analysis.kappa_sweep`), ``generate`` (greedy continuations), ``matched`` (the edit
against activation addition at the edit's KL, bootstrapped over prompts).
"""

from __future__ import annotations

from powerlens.analysis.kappa_sweep import STOPS, KappaRule
from powerlens.analysis.steering.algebra import (
                                                 DELTA,
                                                 EXACT_LSTSQ,
                                                 INVERSE_ITERATIONS,
                                                 bound_note,
                                                 kappa_bound,
                                                 principal_check,
                                                 principal_eig,
                                                 rank1_z,
)
from powerlens.analysis.steering.edits import (
                                                 checksum,
                                                 config_has_lm_head,
                                                 last_call_edit,
                                                 output_projection,
                                                 rank1_output_edit,
                                                 target_vector,
)
from powerlens.analysis.steering.experiment import (
                                                 CONTINUATION_COLUMNS,
                                                 CONTINUATION_TEXT,
                                                 run_steering,
)
from powerlens.analysis.steering.generate import greedy_continuations
from powerlens.analysis.steering.law import (
                                                 SHARED_EDITS,
                                                 LawCache,
                                                 attention_only_prefix,
                                                 attention_only_steering,
                                                 edited_depths,
                                                 edits_every_depth,
                                                 intervention_sites,
)
from powerlens.analysis.steering.measure import measure_model

__all__ = ['DELTA', 'INVERSE_ITERATIONS', 'rank1_z', 'kappa_bound', 'EXACT_LSTSQ', 'bound_note', 'principal_eig',
           'principal_check', 'checksum', 'output_projection', 'rank1_output_edit', 'last_call_edit', 'target_vector',
           'config_has_lm_head', 'measure_model', 'SHARED_EDITS', 'edits_every_depth',
           'edited_depths', 'intervention_sites', 'attention_only_prefix', 'LawCache', 'attention_only_steering',
           'CONTINUATION_COLUMNS', 'CONTINUATION_TEXT', 'run_steering', 'greedy_continuations',
           'KappaRule', 'STOPS']
