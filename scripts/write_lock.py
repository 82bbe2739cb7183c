#!/usr/bin/env python
"""Write models.lock.yaml: each model's resolved revision and file sha256s (pin a later run to it)."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["write-lock", *sys.argv[1:]])
