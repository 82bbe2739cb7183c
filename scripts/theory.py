#!/usr/bin/env python
"""One theory experiment on synthetic layers with a prescribed spectrum: real (consensus rate),
complex (closed orbit), or bipartite (fixed point and its stability with 1 vs several heads)."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["theory", *sys.argv[1:]])
