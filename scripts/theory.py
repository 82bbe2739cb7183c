#!/usr/bin/env python
"""One theory experiment on synthetic layers with a prescribed spectrum: real (consensus rate),
complex (closed orbit), or bipartite (fixed point and its stability with 1 vs several heads)."""

import argparse

from _common import run


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--case", required=True, choices=["real", "complex", "bipartite"])
    ap.add_argument("--out-json", required=True)
    ap.add_argument("--out-npz", required=True)
    for k, v in (("d", 32), ("heads", 4), ("tokens", 16), ("steps", 200), ("seed", 0), ("runs", 100),
                 ("threads", 1)):
        ap.add_argument(f"--{k}", type=int, default=v)
    ap.add_argument("--epsilon", type=float, default=1e-3)
    ap.add_argument("--no-residual", action="store_true", help="iterate M = F instead of I + F")
    a = ap.parse_args()
    from powerlens.steps import theory

    for r in theory(a.case, a.out_json, a.out_npz, a.d, a.heads, a.tokens, a.steps, a.seed, a.runs, a.epsilon,
                    not a.no_residual, a.threads):
        print(f"{r['case']} [{r['attention']}] {r['quantity']}: predicted {r['predicted']:.6g}, "
              f"measured {r['measured']:.6g}, passed {r['passed']}")


if __name__ == "__main__":
    run(main)
