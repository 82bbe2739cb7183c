#!/usr/bin/env python
"""Draw fig_theory and write table_theory from the three theory experiments."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["plot-theory", *sys.argv[1:]])
