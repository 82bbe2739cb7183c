"""Eigendecomposition (float64, CPU) of every unique layer matrix F of one model: all eigenvalues, top-k
eigenvectors with canonical phase, leading plane, per-head and residual (I + F) views."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--tensors", required=True)
    ap.add_argument("--meta", required=True)
    ap.add_argument("--out-npz", required=True)
    ap.add_argument("--out-csv", required=True)
    ap.add_argument("--top-k", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True, help="seed of the random non-leading eigenvector (a null)")


def run(a) -> None:
    from powerlens.pipeline.steps import spectra

    df = spectra(a.tensors, a.meta, out_npz=a.out_npz, out_csv=a.out_csv, top_k=a.top_k, threads=a.threads,
                 seed=a.seed)
    cols = ["layer", "leading_type", "abs_lambda1", "ratio", "ratio_next", "rel_residual"]
    print(df.drop_duplicates("unique_layer")[cols].to_string(index=False))
