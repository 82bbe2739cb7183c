"""analysis: the science, one module per idea, on extracted weights and models.

    spectra      eigen-decomposition of every F = O V in float64: sorted by modulus, canonical phase
    alignment    alignment of tokens with a direction or plane
    nulls        the Monte Carlo null: random subspaces of the lead's dimension
    stats        sign tests and Holm's correction
    dynamics     token dynamics in model and attention-only mode; per-layer statistics
    theory       synthetic layers with known spectra: rate and angle predictions
    steering     rank-1 steering of the last layer vs activation addition
    quantization sensitivity of the spectra and dynamics to weight quantization
    claims       the paper's claims C1-C10 judged from the outputs (Verdict records)

Imports from :mod:`powerlens.models` and :mod:`powerlens.core`, never from outputs or pipeline.
"""
