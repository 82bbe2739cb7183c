"""Prove an extraction: rebuild each attention sublayer from the saved matrices, compare with the real
module in float32 (tolerance 1e-5) and float64 (1e-10). Exits non-zero if either check fails."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--tensors", required=True)
    ap.add_argument("--meta", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--tol32", type=float, required=True,
                    help="largest |error| allowed between the rebuilt and the real sublayer in float32")
    ap.add_argument("--tol64", type=float, required=True,
                    help="largest |error| allowed in float64")


def run(a) -> None:
    from powerlens.pipeline.steps import check_extraction

    r = check_extraction(a.manifest, a.tensors, a.meta, out_path=a.out, threads=a.threads, tol32=a.tol32,
                         tol64=a.tol64)
    for k, c in r["checks"].items():
        print(f"{r['model']} {k}: max |error| {c['max_abs_error']:.3g} (tolerance {c['tolerance']:g})")
