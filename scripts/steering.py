#!/usr/bin/env python
"""Rank-1 steering of one model's last layer (O' = O + alpha u z^T) against activation addition, over a
kappa sweep and several targets, in the real forward pass and the attention-only law."""

import sys

from powerlens.cli import main

if __name__ == "__main__":
    main(["steering", *sys.argv[1:]])
