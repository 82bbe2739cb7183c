#!/usr/bin/env python
"""Write models.lock.yaml: each model's resolved revision and file sha256s (pin a later run to it)."""

import argparse

from _common import run


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("manifests", nargs="+")
    a = ap.parse_args()
    from powerlens.steps import write_lock

    doc = write_lock(a.manifests, a.out)
    print(f"locked {len(doc['models'])} models -> {a.out}")


if __name__ == "__main__":
    run(main)
