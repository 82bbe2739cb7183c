#!/usr/bin/env python
"""table_quantization: per model, type and layer, how far quantized weights move lambda_1, v_1, gamma, rho."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["table-quantization", *sys.argv[1:]])
