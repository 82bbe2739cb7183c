"""The paper's figures, drawn from the pipeline's tables and arrays (never from anything else).

One module per family of figures (``spectra``, ``dynamics``, ``theory``, ``steering``); ``style`` holds
what tells models apart.
"""

from __future__ import annotations

from powerlens.outputs.figures.spectra import fig_spectra, fig_gap
from powerlens.outputs.figures.dynamics import fig_gamma, fig_rho, fig_tilt, fig_albert_consensus, fig_albert_rotation, rotation_runs, dynamics_figures
from powerlens.outputs.figures.theory import fig_theory
from powerlens.outputs.figures.steering import fig_steering

__all__ = ['fig_spectra', 'fig_gap', 'fig_gamma', 'fig_rho', 'fig_tilt', 'fig_albert_consensus', 'fig_albert_rotation',
           'rotation_runs', 'dynamics_figures', 'fig_theory', 'fig_steering']
