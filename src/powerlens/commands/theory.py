"""One theory experiment on synthetic layers with a prescribed spectrum: real (consensus rate),
complex (closed orbit), or bipartite (fixed point and its stability with 1 vs several heads)."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--case", required=True, choices=["real", "complex", "bipartite"])
    ap.add_argument("--out-json", required=True)
    ap.add_argument("--out-npz", required=True)
    for k, v, h in (("d", 32, "dimension d of the synthetic layer"), ("heads", 4, "attention heads"),
                    ("tokens", 16, "tokens per run (even: the bipartite case splits them in two)"),
                    ("steps", 200, "attention-only steps per run"), ("seed", 0, None),
                    ("runs", 100, "random initial states per case"), ("threads", 1, None)):
        ap.add_argument(f"--{k}", type=int, default=v, help=h)
    ap.add_argument("--epsilon", type=float, default=1e-3)
    ap.add_argument("--no-residual", action="store_true", help="iterate M = F instead of I + F")


def run(a) -> None:
    from powerlens.steps import theory

    for r in theory(a.case, out_json=a.out_json, out_npz=a.out_npz, d=a.d, heads=a.heads, tokens=a.tokens,
                    steps=a.steps, seed=a.seed, runs=a.runs, epsilon=a.epsilon, residual=not a.no_residual,
                    threads=a.threads):
        print(f"{r['case']} [{r['attention']}] {r['quantity']}: predicted {r['predicted']:.6g}, "
              f"measured {r['measured']:.6g}, passed {r['passed']}")
