"""Draw fig_theory and write table_theory from the three theory experiments."""

from __future__ import annotations

CASES = ("real", "complex", "bipartite")


def add_arguments(ap) -> None:
    for c in CASES:
        ap.add_argument(f"--{c}-json", required=True, help=f"the {c} case's results (theory step)")
        ap.add_argument(f"--{c}-npz", required=True, help=f"the {c} case's arrays (theory step)")
    ap.add_argument("--fig", required=True, help="fig_theory stem")
    ap.add_argument("--table", required=True, help="table_theory stem")
    ap.add_argument("--dpi", type=int, required=True, help="resolution of the PNG figure")
    ap.add_argument("--alpha", type=float, required=True, help="significance level of C4's verdict (dynamics.alpha)")


def run(a) -> None:
    import numpy as np

    from powerlens.outputs.figures import fig_theory
    from powerlens.core.io import read_json
    from powerlens.outputs.tables import THEORY_MISSING, theory_table, write_table

    docs = {c: read_json(getattr(a, f"{c}_json")) for c in CASES}
    arrs = {}
    for c in CASES:
        with np.load(getattr(a, f"{c}_npz"), allow_pickle=False) as z:
            arrs[c] = {k: z[k] for k in z.files}
    rate = next(r["predicted"] for r in docs["real"]["results"] if r["attention"] == "full")
    angle = next(r["predicted"] for r in docs["complex"]["results"] if r["quantity"].startswith("angle"))
    fig_theory(arrs["real"], arrs["complex"], arrs["bipartite"], {"rate": rate, "angle": angle}, a.fig, a.dpi)
    t = theory_table([r for c in CASES for r in docs[c]["results"]], a.alpha)
    write_table(t, a.table, caption="Theory checks on synthetic layers (prediction under full attention; "
                "softmax rows show how far random W_Q, W_K move the measured values). \"check\" is each row's own "
                "criterion; the rows \"C2 verdict\", \"C3 verdict\" and \"C4 verdict\" are the claims' verdicts, "
                "the same records table_claims shows.", missing=THEORY_MISSING)
    print(t.to_string(index=False))
