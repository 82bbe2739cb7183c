"""One theory experiment on synthetic layers with a prescribed spectrum: real (consensus rate),
complex (closed orbit), or bipartite (fixed point and its stability with 1 vs several heads)."""

from __future__ import annotations


def add_arguments(ap) -> None:
    ap.add_argument("--case", required=True, choices=["real", "complex", "bipartite"])
    ap.add_argument("--out-json", required=True)
    ap.add_argument("--out-npz", required=True)
    for k, h in (("d", "dimension d of the synthetic layer"), ("heads", "attention heads"),
                 ("tokens", "tokens per run (even: the bipartite case splits them in two)"),
                 ("steps", "attention-only steps per run"), ("seed", None),
                 ("runs", "random initial states per case"), ("threads", None)):
        ap.add_argument(f"--{k}", type=int, required=True, help=h)
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--residual", required=True, choices=["yes", "no"],
                    help="yes: iterate the residual map M = I + F; no: M = F")
    ap.add_argument("--c4-sizes", type=int, nargs="+", required=True, help="C4 sweep: token dimensions")
    ap.add_argument("--c4-heads", type=int, nargs="+", required=True, help="C4 sweep: head counts (1 among them)")
    ap.add_argument("--c4-sharpness", type=float, nargs="+", required=True,
                    help="C4 sweep: typical |score| of the bipartite start")
    ap.add_argument("--c4-equilibrium-steps", type=int, required=True,
                    help="C4 sweep: most steps of each cell's equilibrium search")


def run(a) -> None:
    from powerlens.pipeline.steps import theory

    for r in theory(a.case, out_json=a.out_json, out_npz=a.out_npz, d=a.d, heads=a.heads, tokens=a.tokens,
                    steps=a.steps, seed=a.seed, runs=a.runs, epsilon=a.epsilon, residual=a.residual == "yes",
                    threads=a.threads, c4_sizes=a.c4_sizes, c4_heads=a.c4_heads, c4_sharpness=a.c4_sharpness,
                    c4_equilibrium_steps=a.c4_equilibrium_steps):
        print(f"{r['case']} [{r['attention']}] {r['quantity']}: predicted {r['predicted']:.6g}, "
              f"measured {r['measured']:.6g}, passed {r['passed']}")
