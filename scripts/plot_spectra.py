#!/usr/bin/env python
"""Draw fig_spectra and fig_gap and write table_spectra from the per-model spectra outputs."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["plot-spectra", *sys.argv[1:]])
