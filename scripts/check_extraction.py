#!/usr/bin/env python
"""Prove an extraction: rebuild each attention sublayer from the saved matrices, compare with the real
module in float32 (tolerance 1e-5) and float64 (1e-10). Exits non-zero if either check fails."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["check-extraction", *sys.argv[1:]])
