#!/usr/bin/env python
"""Write the run's provenance manifest: versions, BLAS, models (revisions, weight sha256), config hash,
seeds, threads, device, and the start and end time of the run's outputs."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["provenance", *sys.argv[1:]])
