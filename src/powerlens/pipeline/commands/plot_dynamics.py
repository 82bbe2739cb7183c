"""Draw fig_gamma, fig_rho, fig_albert_consensus, fig_albert_rotation and write table_alignment."""

from __future__ import annotations

OUTPUTS = ("fig-gamma", "fig-rho", "fig-albert-consensus", "fig-albert-rotation", "table-alignment")


def add_arguments(ap) -> None:
    ap.add_argument("--csv", nargs="+", required=True, help="per-model, per-mode dynamics CSVs")
    ap.add_argument("--npz", nargs="+", required=True, help="matching dynamics arrays")
    ap.add_argument("--meta", nargs="+", required=True, help="weights.json of every model")
    ap.add_argument("--labels", required=True, help="JSON {model: display label}")
    for o in OUTPUTS:
        ap.add_argument(f"--{o}", required=True, metavar="STEM", help=f"path of {o.replace('-', '_')} without suffix")
    ap.add_argument("--alpha", type=float, required=True, help="significance level after Holm correction")
    ap.add_argument("--dpi", type=int, required=True, help="resolution of the PNG figures")


def run(a) -> None:
    import json

    from powerlens.outputs.figures import dynamics_figures

    t = dynamics_figures(a.csv, a.npz, a.meta, json.loads(a.labels), alpha=a.alpha, dpi=a.dpi,
                         stems={o.replace("-", "_"): getattr(a, o.replace("-", "_")) for o in OUTPUTS})
    print(t.to_string(index=False))
