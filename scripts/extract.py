#!/usr/bin/env python
"""Extract W_Q, W_K, W_V, W_O, biases, LayerNorm and F = W_O W_V for every layer of one model."""

import argparse

from _common import run


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--out-tensors", required=True, help="weights.safetensors")
    ap.add_argument("--out-meta", required=True, help="weights.json")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    from powerlens.steps import extract

    meta = extract(a.manifest, a.out_tensors, a.out_meta, a.threads)
    print(f"{meta['model']}: {meta['n_layers']} layers ({meta['n_unique_layers']} unique), d={meta['d_model']}, "
          f"{meta['n_heads']} heads, {meta['weights_label']}")


if __name__ == "__main__":
    run(main)
