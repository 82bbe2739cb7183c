#!/usr/bin/env python
"""Draw fig_gamma, fig_rho, fig_albert_consensus, fig_albert_rotation and write table_alignment."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["plot-dynamics", *sys.argv[1:]])
