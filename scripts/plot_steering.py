#!/usr/bin/env python
"""Draw fig_steering and write table_steering from every model's steering results."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["plot-steering", *sys.argv[1:]])
