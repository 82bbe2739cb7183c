"""Extract W_Q, W_K, W_V, W_O, biases, LayerNorm and F = W_O W_V for every layer of one model."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--out-tensors", required=True, help="weights.safetensors")
    ap.add_argument("--out-meta", required=True, help="weights.json")
    ap.add_argument("--threads", type=int, required=True)


def run(a) -> None:
    from powerlens.pipeline.steps import extract

    meta = extract(a.manifest, a.out_tensors, a.out_meta, threads=a.threads)
    print(f"{meta['model']}: {meta['n_layers']} layers ({meta['n_unique_layers']} unique), d={meta['d_model']}, "
          f"{meta['n_heads']} heads, {meta['weights_label']}")
