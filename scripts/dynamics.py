#!/usr/bin/env python
"""Token dynamics of one model over the prompt corpus, in mode `model` (real forward pass) or
`attention-only` (the paper's law): per-token alignments with each layer's leading eigenvector, gamma_t,
rho_t and the tilt against the Monte Carlo null of random subspaces (Holm), the non-leading-eigenvector null,
secondary token- and prompt-level tests, and (attention-only) the L2-law diagnostics and a bias-free control."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["dynamics", *sys.argv[1:]])
