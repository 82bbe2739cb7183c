#!/usr/bin/env python
"""Eigendecomposition (float64, CPU) of every unique layer matrix F of one model: all eigenvalues, top-k
eigenvectors with canonical phase, leading plane, per-head and residual (I + F) views."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["spectra", *sys.argv[1:]])
