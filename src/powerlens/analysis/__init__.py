"""analysis: the science, one module per idea, on extracted weights and models.

    spectra      eigen-decomposition of every F = O V in float64: sorted by modulus, canonical phase
    alignment    alignment of tokens with a direction or plane
    leading      the leading eigen-direction of a layer and its kind (real, complex pair)
    nulls        the nulls a lead is tested against: random subspaces (Monte Carlo), F's other eigen-directions
    stats        sign tests and Holm's correction
    decisions    yes / no / undecided from a p's interval, the draw schedule, rounding never deciding
    verdict_tests  the per-layer tests (their columns in a dynamics table), the claims' readings of them, and
                 the one reading of that table (the model's own depth, the per-layer marks)
    across_layers  one p across a model's layers: the partial conjunction, the specificity sum, ranks
    tracking     the lead's members followed from layer to layer: the specificity under dependent layers
    parts        a criterion's part decided from its test's columns, its power, where more draws can move it
    dynamics     token dynamics in model and attention-only mode; per-layer statistics
    theory       synthetic layers with known spectra: rate and angle predictions
    steering     rank-1 steering of the last layer vs activation addition
    kappa_sweep  how far the steering sweeps go: kappa doubled until C9 can be judged, beta until it brackets
    quantization sensitivity of the spectra and dynamics to weight quantization
    claims       the paper's claims C1-C10 judged from the outputs (Verdict records)

Imports from :mod:`powerlens.models` and :mod:`powerlens.core`, never from outputs or pipeline.
"""
