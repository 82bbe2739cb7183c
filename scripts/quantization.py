#!/usr/bin/env python
"""Quantization sensitivity of one full-precision model: quantize its weight matrices with the gguf package's
quantizers, recompute spectra and model-mode dynamics, compare per layer with the full-precision results."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["quantization", *sys.argv[1:]])
