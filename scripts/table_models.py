#!/usr/bin/env python
"""Write table_models.{csv,md,tex} from the extracted models' metadata."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["table-models", *sys.argv[1:]])
