#!/usr/bin/env python
"""Write table_claims: each claim C1-C10 with its criterion (paper.md section 4b, numbers from the config),
the models behind each family verdict, the measured value, the null and the verdict."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["claims", *sys.argv[1:]])
