#!/usr/bin/env python
"""Write the replication article (HTML and PDF) from a run's tables, figures and provenance."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["article", *sys.argv[1:]])
