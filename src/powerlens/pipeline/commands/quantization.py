"""Quantization sensitivity of one full-precision model: quantize its weight matrices with the gguf package's
quantizers, recompute spectra and model-mode dynamics, compare per layer with the full-precision results."""

from __future__ import annotations


def add_arguments(ap) -> None:
    for k in ("manifest", "spectra", "dynamics", "prompts", "out-csv", "out-json"):
        ap.add_argument(f"--{k}", required=True)
    ap.add_argument("--types", nargs="+", required=True, help="gguf quantization types, e.g. Q4_1 Q8_0")
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--max-tokens", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--top-k", type=int, required=True)
    ap.add_argument("--null-draws", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)


def run(a) -> None:
    from powerlens.pipeline.steps import quantization

    df = quantization(a.manifest, a.spectra, a.dynamics, prompts_path=a.prompts, out_csv=a.out_csv,
                      out_json=a.out_json, qtypes=a.types, batch_size=a.batch_size, max_tokens=a.max_tokens,
                      seed=a.seed, top_k=a.top_k, null_draws=a.null_draws, threads=a.threads)
    print(df[["quantization", "layer", "rel_change_lambda1", "leading_type_changed", "delta_gamma",
              "delta_rho"]].to_string(index=False))
