"""Token dynamics of one model over the prompt corpus, in mode `model` (real forward pass) or
`attention-only` (the paper's law): per-token alignments with each layer's leading eigenvector, gamma_t,
rho_t and the tilt against the Monte Carlo null of random subspaces (Holm), the non-leading-eigenvector null,
secondary token- and prompt-level tests, and (attention-only) the L2-law diagnostics and a bias-free control."""

from __future__ import annotations


def add_arguments(ap) -> None:
    for k in ("manifest", "tensors", "meta", "spectra", "prompts", "out-npz", "out-csv", "out-json"):
        ap.add_argument(f"--{k}", required=True)
    ap.add_argument("--mode", required=True, choices=["model", "attention-only"])
    ap.add_argument("--norm", required=True, choices=["l2", "layernorm"])
    ap.add_argument("--steps", type=int, required=True, help="attention-only steps for shared-weight models")
    ap.add_argument("--long-run-prompts", type=int, required=True,
                    help="prompts that go on past the model's depth in long shared-weight runs (seeded sample)")
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--batch-tokens", type=int, required=True, help="tokens per batch once padded, at most")
    ap.add_argument("--max-tokens", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--dtype", required=True, choices=["float32", "float64"])
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--null-draws", type=int, required=True, help="R random subspaces of the Monte Carlo null")
    ap.add_argument("--control", choices=["yes", "no"], required=True,
                    help="attention-only: also run the bias-free control (attention biases removed)")


def run(a) -> None:
    from powerlens.pipeline.steps import dynamics

    df = dynamics(a.manifest, a.tensors, a.meta, spectra_npz=a.spectra, prompts_path=a.prompts,
                  out_npz=a.out_npz, out_csv=a.out_csv, out_json=a.out_json, mode=a.mode, norm=a.norm,
                  steps=a.steps, batch_size=a.batch_size, max_tokens=a.max_tokens, seed=a.seed, device=a.device,
                  dtype=a.dtype, threads=a.threads, null_draws=a.null_draws, control=a.control == "yes",
                  long_run_prompts=a.long_run_prompts, batch_tokens=a.batch_tokens)
    cols = ["layer", "leading_type", "gamma", "gamma_null_q95", "gamma_p_holm", "rho", "rho_null_q95", "rho_p_holm",
            "tilt", "tilt_p_holm"]
    print(df[cols].head(60).to_string(index=False))
