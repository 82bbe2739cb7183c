"""The paper's figures, drawn from the pipeline's tables and arrays (never from anything else).

One module per family of figures (``spectra``, ``dynamics``, ``theory``, ``steering``); ``style`` holds
what tells models apart; ``captions`` each figure's caption.
"""

from __future__ import annotations

from powerlens.outputs.figures.dynamics import (
           dynamics_figures,
           fig_albert_consensus,
           fig_albert_rotation,
           fig_gamma,
           fig_rho,
           fig_tilt,
           rotation_runs,
)
from powerlens.outputs.figures.spectra import fig_gamma_gap, fig_gap, fig_spectra, gamma_gap_points
from powerlens.outputs.figures.steering import fig_steering
from powerlens.outputs.figures.theory import fig_theory

__all__ = ['fig_spectra', 'fig_gap', 'fig_gamma_gap', 'gamma_gap_points',
           'fig_gamma', 'fig_rho', 'fig_tilt', 'fig_albert_consensus', 'fig_albert_rotation',
           'rotation_runs', 'dynamics_figures', 'fig_theory', 'fig_steering']
