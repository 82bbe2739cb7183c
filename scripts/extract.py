#!/usr/bin/env python
"""Extract W_Q, W_K, W_V, W_O, biases, LayerNorm and F = W_O W_V for every layer of one model."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["extract", *sys.argv[1:]])
