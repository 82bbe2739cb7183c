#!/usr/bin/env python
"""Check a fetched model's steering targets (single vocabulary entry, LM head for unembedding targets)."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["steering-targets", *sys.argv[1:]])
