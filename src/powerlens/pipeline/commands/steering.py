"""Rank-1 steering of one model's last layer (O' = O + alpha u z^T) against activation addition, over a
kappa sweep and several targets, in the real forward pass and the attention-only law."""

from __future__ import annotations


def add_arguments(ap) -> None:
    for k in ("manifest", "tensors", "meta", "spectra", "prompts", "out-csv", "out-json"):
        ap.add_argument(f"--{k}", required=True)
    ap.add_argument("--targets", required=True, help="JSON list of {kind, token?, seed?}")
    ap.add_argument("--kappas", required=True, help="JSON list of kappa values")
    ap.add_argument("--max-prompts", type=int, required=True)
    ap.add_argument("--batch-size", type=int, required=True, help="prompts per batch of the steering passes")
    ap.add_argument("--max-tokens", type=int, required=True)
    ap.add_argument("--shared-edit", required=True, choices=["every_depth", "last_depth"],
                    help="shared-weight models: edit and baseline at every depth or at the last depth only")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--out-continuations", required=True, help="CSV of greedy continuations (causal LMs)")
    ap.add_argument("--continuation-prompts", required=True, help="JSON list of prompts to continue")
    ap.add_argument("--continuation-tokens", type=int, required=True)


def run(a) -> None:
    import json

    from powerlens.pipeline.steps import steering

    df = steering(a.manifest, a.tensors, a.meta, spectra_npz=a.spectra, prompts_path=a.prompts,
                  out_csv=a.out_csv, out_json=a.out_json, targets=json.loads(a.targets),
                  kappas=json.loads(a.kappas), max_prompts=a.max_prompts, batch_size=a.batch_size,
                  max_tokens=a.max_tokens, shared_edit=a.shared_edit, seed=a.seed, device=a.device, threads=a.threads,
                  out_continuations=a.out_continuations, continuation_prompts=json.loads(a.continuation_prompts),
                  continuation_tokens=a.continuation_tokens)
    print(df[["target", "kappa", "method", "u_principal", "cos_after_layer_model", "p_target"]].to_string(index=False))
