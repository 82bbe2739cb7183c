#!/usr/bin/env python
"""Write table_speed: each heavy job's wall time (its benchmark file) beside its arithmetic lower bound and the ratio."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["speed", *sys.argv[1:]])
